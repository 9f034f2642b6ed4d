"""The closed loop of perf.engine.load for the HTTP baselines: `concurrency` asyncio clients (aiohttp, one
keep-alive connection each) POSTing JSON bodies, each sending its next request as soon as its answer arrived.

perf_analyzer drives the baselines on the CPU machines; the GPU host has none (it ships in tritonclient's
14 MB platform wheel, which is not carried), so the baselines get the same closed loop as the kit, with the
same figures: a warm-up, then a measured window, the server tree's and this process's CPU at its bounds.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import psutil

from perf.engine.inputs import InputSet
from perf.engine.load import Window, latency_row, run_window
from perf.engine.procstats import cpu_seconds

JSON = {"Content-Type": "application/json"}


class HttpWindow(Window):
    """A Window whose clients POST the baselines' JSON bodies."""

    def measure(self, target, inputs: InputSet, out_dir: Path, name: str) -> dict:
        url = f"http://127.0.0.1:{target.port}/{target.workload.endpoint}"
        return asyncio.run(closed_loop(url, target.pid, inputs.items, self))


def snapshot(pid: int) -> dict:
    own = psutil.Process().cpu_times()
    return {"time": time.perf_counter(), "server_cpu_s": cpu_seconds(pid), "client_cpu_s": own.user + own.system}


async def closed_loop(url: str, pid: int, bodies: list[bytes], window: HttpWindow) -> dict:
    """Client k sends bodies k, k + concurrency, ...; a request fails on any status but 200 or any exception."""
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def send(index: int) -> None:
            async with session.post(url, data=bodies[index % len(bodies)], headers=JSON) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")

        latencies, errors, start, end = await run_window(send, window, lambda: snapshot(pid))
    wall = end["time"] - start["time"]
    return {
        **latency_row(window, latencies, errors, wall, end["client_cpu_s"] - start["client_cpu_s"]),
        "server_cpu_s": round(end["server_cpu_s"] - start["server_cpu_s"], 2),
    }
