"""A closed-loop load generator in this process, for workloads perf_analyzer cannot drive (ResNet's raw
FP32 tensors of many shapes): `concurrency` asyncio gRPC clients, each sending its next request as
soon as its previous answer arrived.

A point is a warm-up, then a measured window: requests answered inside it, their latencies, and
the server tree's CPU, this process's CPU and the target's counters at its two bounds. No memory
sampler runs beside it: its thread would count as client CPU.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import tritonclient.grpc.aio as aioclient
from tritonclient.utils import np_to_triton_dtype

from perf.engine.inputs import InputSet
from perf.engine.procstats import cpu_seconds
from perf.engine.targets import KitTarget, difference


@dataclass
class Window:
    """One point: `concurrency` clients, `warmup_s` unmeasured, then `duration_s` measured."""

    concurrency: int
    warmup_s: float
    duration_s: float

    @property
    def label(self) -> str:
        return f"c={self.concurrency}"

    def measure(self, target: KitTarget, inputs: InputSet, out_dir: Path, name: str) -> dict:
        return asyncio.run(closed_loop(target, inputs.items, self))


def snapshot(target: KitTarget) -> dict:
    own = psutil.Process().cpu_times()
    return {
        "time": time.perf_counter(),
        "server_cpu_s": cpu_seconds(target.pid),
        "client_cpu_s": own.user + own.system,
        **target.counters(),
    }


def tensor(name: str, value: np.ndarray) -> aioclient.InferInput:
    request = aioclient.InferInput(name, list(value.shape), np_to_triton_dtype(value.dtype))
    request.set_data_from_numpy(value)
    return request


async def run_window(
    send: Callable[[int], Awaitable[None]], window: Window, snapshot: Callable[[], dict]
) -> tuple[list[float], int, dict, dict]:
    """Client k awaits send(k), send(k + concurrency), ... until the window ends; `send` raises when a
    request fails. Returns the latencies answered inside the measured window, the failures, and
    `snapshot()` at the window's two bounds."""
    begin = time.perf_counter()
    measure_from, stop_at = begin + window.warmup_s, begin + window.warmup_s + window.duration_s
    latencies: list[float] = []
    errors = 0

    async def loop(k: int) -> None:
        nonlocal errors
        index = k
        while time.perf_counter() < stop_at:
            sent = time.perf_counter()
            try:
                await send(index)
            except Exception:  # counted and reported: a point with errors is not a result
                errors += 1
                continue
            finally:
                index += window.concurrency
            done = time.perf_counter()
            if measure_from <= done <= stop_at:
                latencies.append(done - sent)

    async def bounds() -> tuple[dict, dict]:
        await asyncio.sleep(window.warmup_s)
        first = await asyncio.to_thread(snapshot)
        await asyncio.sleep(window.duration_s)
        return first, await asyncio.to_thread(snapshot)

    (start, end), *_ = await asyncio.gather(bounds(), *(loop(k) for k in range(window.concurrency)))
    return latencies, errors, start, end


def latency_row(window: Window, latencies: list[float], errors: int, wall_s: float, client_cpu_s: float) -> dict:
    """What every closed-loop point reports: throughput and latency percentiles over the measured window."""
    ms = np.array(latencies) * 1000 if latencies else np.array([np.nan])
    return {
        "concurrency": window.concurrency,
        "rate": None,
        "requests": len(latencies),
        "throughput": len(latencies) / wall_s,
        **{f"p{p}_ms": float(np.percentile(ms, p)) for p in (50, 90, 95, 99)},
        "avg_ms": float(ms.mean()),
        "client_cpu_s": client_cpu_s,
        "wall_s": wall_s,
        "error": f"{errors} requests failed" if errors else None,
    }


async def closed_loop(target: KitTarget, items: list[dict[str, np.ndarray]], window: Window) -> dict:
    """Client k sends items k, k + concurrency, ... (tensors by input name) to the workload's entry model."""
    client = aioclient.InferenceServerClient(target.grpc_url)

    async def send(index: int) -> None:
        item = items[index % len(items)]
        await client.infer(target.workload.entry, [tensor(name, value) for name, value in item.items()])

    try:
        latencies, errors, start, end = await run_window(send, window, lambda: snapshot(target))
    finally:
        await client.close()
    over = difference(end, start)
    return {
        **latency_row(window, latencies, errors, over["time"], over["client_cpu_s"]),
        "server_cpu_s": round(over["server_cpu_s"], 2),
        "triton": over["triton"],
        "metrics": over["metrics"],
    }
