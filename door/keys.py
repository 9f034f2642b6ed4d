"""The door's API keys on its inference routes: `X-API-Key`, or `Authorization: Bearer KEY`, the header OpenAI's
and TEI's clients send (their `api_key`), so that such a client switches to the kit by its base URL and key alone."""

from __future__ import annotations

import secrets

from fastapi import Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from door.problems import Problem

API_KEY = APIKeyHeader(name="X-API-Key", auto_error=False, description="the door's keys ($DOOR_API_KEYS)")
BEARER = HTTPBearer(auto_error=False, description="the door's keys ($DOOR_API_KEYS), as OpenAI's and TEI's clients send them")


class KeyCheck:
    """A route dependency: one of `keys` in either header, or 401."""

    def __init__(self, keys: frozenset[str]):
        self.keys = keys

    def __call__(
        self,
        key: str | None = Security(API_KEY),
        bearer: HTTPAuthorizationCredentials | None = Security(BEARER),
    ) -> None:
        given = [key or "", bearer.credentials if bearer is not None else ""]
        if not any(secrets.compare_digest(sent, known) for sent in given for known in self.keys):
            raise Problem(
                401,
                "missing-api-key",
                "send a valid key in the X-API-Key header, or as Authorization: Bearer KEY",
                {"WWW-Authenticate": "Bearer"},
            )
