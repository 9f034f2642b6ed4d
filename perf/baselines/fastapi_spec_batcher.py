"""The FastAPI + asyncio queue batcher design on a spec's model: each request's rows go on a queue; one task takes
requests up to BATCH_SIZE_MAX rows, waiting at most BATCH_TIMEOUT seconds after the first, and runs those of one
shape together (rows concatenated) in a worker thread, then gives each request its rows back.

    MODEL_SPEC=models/scorer.toml BATCH_SIZE_MAX=64 BATCH_TIMEOUT=0.005 uvicorn perf.baselines.fastapi_tensor_batcher:app
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from fastapi import Body

from perf.baselines.service import next_batch, refusing_bad_input, running, service
from perf.baselines.tensor_model import from_env

BATCH_SIZE_MAX = int(os.environ.get("BATCH_SIZE_MAX", "64"))
BATCH_TIMEOUT = float(os.environ.get("BATCH_TIMEOUT", "0.005"))

model = from_env()
queue: asyncio.Queue = asyncio.Queue()
runner = ThreadPoolExecutor(1)  # one batch at a time: the session already uses ORT_THREADS cores
Item = tuple[dict[str, np.ndarray], asyncio.Future]


def rows(arrays: dict[str, np.ndarray]) -> int:
    return len(next(iter(arrays.values())))


def run_batch(items: list[Item]) -> list[list[np.ndarray] | Exception]:
    """Each request's outputs; requests whose inputs have the same shapes share one session run."""
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


async def batch_loop() -> None:
    loop = asyncio.get_running_loop()
    while True:
        batch = await next_batch(queue, BATCH_SIZE_MAX, BATCH_TIMEOUT, size=lambda item: rows(item[0]))
        answers = await loop.run_in_executor(runner, run_batch, batch)
        for (_, future), answer in zip(batch, answers):
            future.set_exception(answer) if isinstance(answer, Exception) else future.set_result(answer)


app = service(lifespan=running(batch_loop))


@app.post("/predict")
async def predict(body: dict = Body(...)):
    arrays = refusing_bad_input(lambda: model.arrays(body))
    future = asyncio.get_running_loop().create_future()
    queue.put_nowait((arrays, future))
    return model.answer(await future)
