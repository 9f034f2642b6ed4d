"""What every FastAPI baseline has, as its field report wrote it: an app with a health route, and the 400 a request
the kit would refuse gets (kit.pipelines.errors.InputError) instead of a 500; and what both asyncio batchers share:
the loop that takes the next batch off their queue, run beside the app for its lifetime."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from kit.pipelines.errors import InputError

T = TypeVar("T")


class TextIn(BaseModel):
    text: str


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


async def next_batch(queue: asyncio.Queue, limit: int, timeout: float, size: Callable[[object], int] = lambda _: 1) -> list:
    """The first waiting item, then more until their `size`s reach `limit` or `timeout` seconds after the first."""
    loop = asyncio.get_running_loop()
    batch = [await queue.get()]
    deadline, total = loop.time() + timeout, size(batch[0])
    while total < limit and (left := deadline - loop.time()) > 0:
        try:
            batch.append(await asyncio.wait_for(queue.get(), left))
        except TimeoutError:
            break
        total += size(batch[-1])
    return batch


def running(task: Callable[[], Awaitable[None]]):
    """A FastAPI lifespan that runs `task()` (a batcher's loop) while the app serves."""

    @asynccontextmanager
    async def lifespan(_app):
        background = asyncio.create_task(task())
        yield
        background.cancel()

    return lifespan
