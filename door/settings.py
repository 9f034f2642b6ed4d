"""The door's own settings: where Triton is, who may call, how long a body may take to arrive.

The models' limits are not here: they come from the configs Triton serves (door.contract).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.control.runtime import is_loopback

API_KEYS_ENV = "DOOR_API_KEYS"
API_KEYS_FILE_ENV = "DOOR_API_KEYS_FILE"


class SettingsError(ValueError):
    """The door cannot start with these settings; the message says what to change."""


@dataclass(frozen=True)
class DoorSettings:
    """`max_texts`: texts per RADAR call. `body_timeout`: seconds for a whole body to arrive (a slow drip
    holds nothing longer). `triton_timeout`: seconds for Triton's answer. `rate_window`, `max_retry_after`:
    how Retry-After is measured and capped (door.flow); `unavailable_retry_after`: the one sent while
    Triton is unreachable or restarting (a supervised restart takes seconds). `canary_interval`: seconds
    between runs of the served-numerics canary (door.canary)."""

    triton: str = "127.0.0.1:8001"
    api_keys: frozenset[str] = frozenset()
    cors_origins: tuple[str, ...] = ()
    max_texts: int = 64
    body_timeout: float = 30.0
    triton_timeout: float = 120.0
    rate_window: float = 10.0
    max_retry_after: int = 30
    unavailable_retry_after: int = 2
    canary_interval: float = 300.0

    def __post_init__(self) -> None:
        if not self.canary_interval > 0:
            raise SettingsError(f"the canary interval must be a positive number of seconds, not {self.canary_interval}")


def api_keys(host: str, environ: Mapping[str, str], disabled: bool = False) -> frozenset[str]:
    """The keys inference needs: $DOOR_API_KEYS (comma-separated) and the lines of the file named by
    $DOOR_API_KEYS_FILE. None on loopback unless given; beyond loopback the door refuses to start
    without one, unless `disabled` says so on purpose (e.g. behind a gateway that authenticates)."""
    if disabled:
        return frozenset()
    keys = {key.strip() for key in environ.get(API_KEYS_ENV, "").split(",")}
    if environ.get(API_KEYS_FILE_ENV):
        try:
            keys |= {line.strip() for line in Path(environ[API_KEYS_FILE_ENV]).read_text().splitlines()}
        except OSError as exc:
            raise SettingsError(f"${API_KEYS_FILE_ENV}: {exc}") from None
    keys.discard("")
    if not keys and not is_loopback(host):
        raise SettingsError(
            f"the door listens on {host}, beyond loopback: set ${API_KEYS_ENV} or ${API_KEYS_FILE_ENV}, "
            "or pass --no-api-keys to serve inference without keys"
        )
    return frozenset(keys)
