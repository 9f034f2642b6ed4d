"""The FastAPI + asyncio queue batcher design: requests put their chunks on a queue; one task
takes up to BATCH_SIZE_MAX chunks, waiting at most BATCH_TIMEOUT seconds after the first, and
runs them together (one session run per length bucket) in a worker thread.

    BATCH_SIZE_MAX=16 BATCH_TIMEOUT=0.01 uvicorn perf.baselines.fastapi_batcher:app --port 8080
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from perf.baselines.radar_model import from_env
from perf.baselines.service import TextIn, next_batch, refusing_bad_input, running, service

BATCH_SIZE_MAX = int(os.environ.get("BATCH_SIZE_MAX", "16"))
BATCH_TIMEOUT = float(os.environ.get("BATCH_TIMEOUT", "0.01"))

model = from_env()
queue: asyncio.Queue = asyncio.Queue()
runner = ThreadPoolExecutor(1)  # one batch at a time: the session already uses ORT_THREADS cores


def run_batch(items: list[tuple[np.ndarray, np.ndarray, asyncio.Future]]) -> list[np.ndarray]:
    """Logits per item; items of equal length (bucket) share one session run."""
    out: list[np.ndarray] = [None] * len(items)  # type: ignore[list-item]
    by_length: dict[int, list[int]] = {}
    for i, (ids, _, _) in enumerate(items):
        by_length.setdefault(len(ids), []).append(i)
    for indices in by_length.values():
        logits = model.logits(np.stack([items[i][0] for i in indices]), np.stack([items[i][1] for i in indices]))
        for row, i in enumerate(indices):
            out[i] = logits[row]
    return out


async def batch_loop() -> None:
    loop = asyncio.get_running_loop()
    while True:
        batch = await next_batch(queue, BATCH_SIZE_MAX, BATCH_TIMEOUT)
        try:
            logits = await loop.run_in_executor(runner, run_batch, batch)
        except Exception as exc:  # the batch's requests fail; the loop keeps serving
            for _, _, future in batch:
                future.set_exception(exc)
            continue
        for (_, _, future), row in zip(batch, logits):
            future.set_result(row)


app = service(lifespan=running(batch_loop))


@app.post("/predict")
async def predict(body: TextIn):
    plan = refusing_bad_input(lambda: model.plan(body.text))
    loop = asyncio.get_running_loop()
    futures = []
    for group in plan.groups:
        group_futures = []
        for ids, mask in zip(group.input_ids, group.attention_mask):
            future = loop.create_future()
            queue.put_nowait((ids, mask, future))
            group_futures.append(future)
        futures.append(group_futures)
    logits = [np.stack(await asyncio.gather(*group)) for group in futures]
    return model.respond(plan, logits)
