"""What every FastAPI baseline has, as its field report wrote it: an app with a health route, and the 400 a request
the kit would refuse gets (kit.pipelines.errors.InputError) instead of a 500."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from fastapi import FastAPI, HTTPException

from kit.pipelines.errors import InputError

T = TypeVar("T")


def service(**kwargs) -> FastAPI:
    app = FastAPI(**kwargs)

    @app.get("/health")
    def health():
        return {"status": "ok"}

    return app


def refusing_bad_input(work: Callable[[], T]) -> T:
    """`work()`, with the kit's refusal of a bad input answered 400."""
    try:
        return work()
    except InputError as exc:
        raise HTTPException(400, str(exc)) from None
