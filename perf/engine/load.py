"""The load generator of every point, in this process: `concurrency` asyncio clients, each sending its next request
as soon as its previous answer arrived. Triton is reached over gRPC (tritonclient's asyncio client, the input set's
tensors); the door and the baselines by POSTs (aiohttp, a keep-alive connection per client, the input set's JSON
bodies, or its binary ones for the door where the set has them), so every design gets the same loop and the same
figures. (perf_analyzer, which drove the older committed runs, cannot send ResNet's raw FP32 tensors of many shapes
and is not carried to the GPU host.)

A point is a warm-up, then a measured window: requests answered inside it, their latencies, and the server trees'
CPU, this process's CPU and the target's counters at its two bounds, and the trees' peak memory after it. No memory
sampler runs beside it: its thread would count as client CPU.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass

import aiohttp
import numpy as np
import psutil
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from tritonclient.utils import np_to_triton_dtype

from perf.engine.inputs import InputSet
from perf.engine.procstats import cpu_seconds_by_role, peak_rss_bytes
from perf.engine.targets import difference

JSON = {"Content-Type": "application/json"}
RAW = {"Content-Type": "application/octet-stream"}
# A request that takes longer fails the point instead of hanging it.
REQUEST_TIMEOUT_S = 600.0
ACCURACY_TIMEOUT_S = 60.0  # one request of an accuracy check: a hung server fails the check, not the run


@dataclass
class Window:
    """One point: `concurrency` clients, `warmup_s` unmeasured, then `duration_s` measured."""

    concurrency: int
    warmup_s: float
    duration_s: float

    @property
    def label(self) -> str:
        return f"c={self.concurrency}"

    @property
    def seconds(self) -> float:
        """What the point takes, for a time budget."""
        return self.warmup_s + self.duration_s

    def measure(self, target, inputs: InputSet) -> dict:
        loop = grpc_loop if target.protocol == "grpc" else http_loop
        row = asyncio.run(loop(target, inputs, self))
        return row | {"peak_rss_mb": round(peak_rss_bytes(target.pids) / 2**20)}


def snapshot(target) -> dict:
    own = psutil.Process().cpu_times()
    return {
        "time": time.perf_counter(),
        "server_cpu_s_by_role": cpu_seconds_by_role(target.pids),
        "client_cpu_s": own.user + own.system,
        **target.counters(),
    }


def tensor(name: str, value: np.ndarray) -> aioclient.InferInput:
    """One input of a request (the same class serves tritonclient's gRPC client, asyncio or not)."""
    request = aioclient.InferInput(name, list(value.shape), np_to_triton_dtype(value.dtype))
    request.set_data_from_numpy(value)
    return request


def served_answers(target, model: str, requests: Iterable[dict[str, np.ndarray]]) -> Iterator[grpcclient.InferResult]:
    """Each request's answer from `model` on the target's Triton, one at a time, as an accuracy check asks them."""
    client = grpcclient.InferenceServerClient(target.grpc_url)
    try:
        for arrays in requests:
            yield client.infer(model, [tensor(k, v) for k, v in arrays.items()], client_timeout=ACCURACY_TIMEOUT_S)
    finally:
        client.close()


def max_diff(served: np.ndarray, want: np.ndarray) -> float:
    """The largest absolute difference of a served output from its reference, in float64 (0 for an empty one)."""
    return float(np.abs(served.reshape(want.shape).astype(np.float64) - want).max(initial=0.0))


def probabilities_check(pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """An accuracy check's figures for (served, reference) class probabilities of each request: the largest difference
    and the share of requests whose most probable class agrees."""
    return {
        "requests": len(pairs),
        "max_abs_diff": max((max_diff(served, want) for served, want in pairs), default=0.0),
        "top1_agreement": sum(int(served.argmax() == want.argmax()) for served, want in pairs) / max(1, len(pairs)),
    }


async def run_window(
    send: Callable[[int], Awaitable[None]], window: Window, snapshot: Callable[[], dict]
) -> tuple[list[float], Counter[str], dict, dict]:
    """Client k awaits send(k), send(k + concurrency), ... until the window ends; `send` raises when a
    request fails. Returns the latencies answered inside the measured window, the failures by what they raised, and
    `snapshot()` at the window's two bounds. The warm-up lasts until every client has had an outcome (an answer or a
    failure), and the measured window until one came inside it, however long the seconds asked for: on a busy
    machine a short point could otherwise end before a design answered anything, and read as 0/s."""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    measuring, stopped = asyncio.Event(), asyncio.Event()
    warm, outcomes = set(), asyncio.Event()

    async def loop(k: int) -> None:
        index = k
        while not stopped.is_set():
            sent = time.perf_counter()
            try:
                await send(index)
            except Exception as exc:  # counted and reported: a point with errors is not a result
                errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
                continue
            else:
                if measuring.is_set() and not stopped.is_set():
                    latencies.append(time.perf_counter() - sent)
            finally:
                index += window.concurrency
                warm.add(k)
                if measuring.is_set():
                    outcomes.set()

    async def bounds() -> tuple[dict, dict]:
        await asyncio.sleep(window.warmup_s)
        while len(warm) < window.concurrency:
            await asyncio.sleep(0.05)
        first = await asyncio.to_thread(snapshot)
        measuring.set()
        await asyncio.sleep(window.duration_s)
        await outcomes.wait()
        stopped.set()
        return first, await asyncio.to_thread(snapshot)

    (start, end), *_ = await asyncio.gather(bounds(), *(loop(k) for k in range(window.concurrency)))
    return latencies, errors, start, end


def failed(errors: Counter[str]) -> str | None:
    """The failures in words, the most frequent causes first."""
    causes = "; ".join(f"{count}x {cause}" for cause, count in errors.most_common(3))
    return f"{sum(errors.values())} requests failed ({causes})" if errors else None


def latency_row(window: Window, latencies: list[float], errors: Counter[str], wall_s: float, client_cpu_s: float) -> dict:
    """What every closed-loop point reports: throughput and latency percentiles over the measured window."""
    ms = np.array(latencies) * 1000 if latencies else np.array([np.nan])
    return {
        "concurrency": window.concurrency,
        "requests": len(latencies),
        "throughput": len(latencies) / wall_s,
        **{f"p{p}_ms": float(np.percentile(ms, p)) for p in (50, 90, 95, 99)},
        "avg_ms": float(ms.mean()),
        "client_cpu_s": client_cpu_s,
        "wall_s": wall_s,
        "error": failed(errors),
    }


def point_row(window: Window, latencies: list[float], errors: Counter[str], start: dict, end: dict) -> dict:
    over = difference(end, start)
    by_role = {k: round(v, 2) for k, v in sorted(over["server_cpu_s_by_role"].items(), key=lambda kv: -kv[1])}
    return {
        **latency_row(window, latencies, errors, over["time"], over["client_cpu_s"]),
        "server_cpu_s": round(sum(over["server_cpu_s_by_role"].values()), 2),
        "server_cpu_s_by_role": by_role,
        **{k: over[k] for k in ("triton", "metrics", "device")},
    }


async def grpc_loop(target, inputs: InputSet, window: Window) -> dict:
    """Client k sends tensors k, k + concurrency, ... (by input name) to the workload's entry model."""
    client = aioclient.InferenceServerClient(target.grpc_url)
    items = inputs.tensors

    async def send(index: int) -> None:
        item = items[index % len(items)]
        await client.infer(
            target.workload.entry, [tensor(name, value) for name, value in item.items()], client_timeout=REQUEST_TIMEOUT_S
        )

    try:
        result = await run_window(send, window, lambda: snapshot(target))
    finally:
        await client.close()
    return point_row(window, *result)


async def http_loop(target, inputs: InputSet, window: Window) -> dict:
    """Client k POSTs bodies k, k + concurrency, ... to the target's route; any status but 200 fails the request."""
    url = f"{target.http_url}/{target.route}"
    if target.family == "door" and inputs.raw:
        posts = [(f"{url}?{query}", body, RAW) for body, query in inputs.raw]
    else:
        posts = [(url, body, JSON) for body in inputs.bodies]
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def send(index: int) -> None:
            where, body, headers = posts[index % len(posts)]
            async with session.post(where, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")

        result = await run_window(send, window, lambda: snapshot(target))
    return point_row(window, *result)
