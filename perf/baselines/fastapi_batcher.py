"""The FastAPI + asyncio queue batcher design: each request's parts (a spec model's rows, or each of RADAR's chunks) go
on a queue; one task takes parts up to BATCH_SIZE_MAX rows, waiting at most BATCH_TIMEOUT seconds after the first, and
runs those of one shape together (rows concatenated: RADAR's chunks of one length bucket) in a worker thread, then
gives each request its rows back.

    BASELINE_MODEL=radar BATCH_SIZE_MAX=16 BATCH_TIMEOUT=0.01 uvicorn perf.baselines.fastapi_batcher:app --port 8080
    MODEL_SPEC=models/scorer.toml BATCH_SIZE_MAX=64 BATCH_TIMEOUT=0.005 uvicorn perf.baselines.fastapi_batcher:app

The model is perf.baselines.models' (RADAR's, or a spec's by its task); an image classifier's images (each of the
graph's one size) are decoded and preprocessed in FastAPI's thread pool (the model's `inputs_in_threads`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Protocol

import numpy as np
from fastapi import Body, FastAPI
from starlette.concurrency import run_in_threadpool

from perf.baselines.models import from_env
from perf.baselines.service import refusing_bad_input, service

BATCH_SIZE_MAX = int(os.environ.get("BATCH_SIZE_MAX", "64"))
BATCH_TIMEOUT = float(os.environ.get("BATCH_TIMEOUT", "0.005"))
Item = tuple[dict[str, np.ndarray], asyncio.Future]
Answer = Callable[[list[list[np.ndarray]]], dict]


class Batchable(Protocol):
    inputs_in_threads: bool

    def parts(self, body: object) -> tuple[list[dict[str, np.ndarray]], Answer]: ...
    def run(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]: ...


def rows(arrays: dict[str, np.ndarray]) -> int:
    return len(next(iter(arrays.values())))


def run_batch(model: Batchable, items: list[Item]) -> list[list[np.ndarray] | Exception]:
    """Each part's outputs; parts whose inputs have the same shapes share one session run."""
    out: list = [None] * len(items)
    by_shape: dict[tuple, list[int]] = {}
    for i, (arrays, _) in enumerate(items):
        by_shape.setdefault(tuple(a.shape[1:] for a in arrays.values()), []).append(i)
    for indices in by_shape.values():
        names = items[indices[0]][0]
        try:
            outputs = model.run({name: np.concatenate([items[i][0][name] for i in indices]) for name in names})
        except Exception as exc:  # this group's requests fail; the others are answered
            for i in indices:
                out[i] = exc
            continue
        start = 0
        for i in indices:
            end = start + rows(items[i][0])
            out[i] = [value[start:end] for value in outputs]
            start = end
    return out


async def next_batch(queue: asyncio.Queue, limit: int, timeout: float) -> list[Item]:
    """The first waiting part, then more until their rows reach `limit` or `timeout` seconds after the first."""
    loop = asyncio.get_running_loop()
    batch = [await queue.get()]
    deadline, total = loop.time() + timeout, rows(batch[0][0])
    while total < limit and (left := deadline - loop.time()) > 0:
        try:
            batch.append(await asyncio.wait_for(queue.get(), left))
        except TimeoutError:
            break
        total += rows(batch[-1][0])
    return batch


def batcher(load: Callable[[], Batchable]) -> FastAPI:
    """The design on the model `load()` makes as the app starts."""
    queue: asyncio.Queue = asyncio.Queue()
    runner = ThreadPoolExecutor(1)  # one batch at a time: the session already uses ORT_THREADS cores
    served: dict[str, Batchable] = {}

    async def batch_loop() -> None:
        loop, model = asyncio.get_running_loop(), served["model"]
        while True:
            batch = await next_batch(queue, BATCH_SIZE_MAX, BATCH_TIMEOUT)
            answers = await loop.run_in_executor(runner, run_batch, model, batch)
            for (_, future), answer in zip(batch, answers):
                future.set_exception(answer) if isinstance(answer, Exception) else future.set_result(answer)

    @asynccontextmanager
    async def lifespan(_app):
        served["model"] = load()
        background = asyncio.create_task(batch_loop())  # beside the app for its lifetime
        yield
        background.cancel()

    app = service(lifespan=lifespan)

    @app.post("/predict")
    async def predict(body: dict = Body(...)):
        model = served["model"]
        made = lambda: refusing_bad_input(lambda: model.parts(body))  # noqa: E731
        parts, answer = await run_in_threadpool(made) if model.inputs_in_threads else made()
        futures = [asyncio.get_running_loop().create_future() for _ in parts]
        for arrays, future in zip(parts, futures):
            queue.put_nowait((arrays, future))
        return answer(list(await asyncio.gather(*futures)))

    return app


app = batcher(from_env)
