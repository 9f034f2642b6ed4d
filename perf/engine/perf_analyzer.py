"""Run NVIDIA's perf_analyzer (shipped in the tritonclient 2.51 wheel) and parse what it measured.

One load generator for every target: Triton through its own gRPC client, the hand-rolled HTTP
services through perf_analyzer's `openai` service kind, which POSTs each `payload` of the
--input-data file as a JSON body to an endpoint (and fails on any non-200 answer). So both sides
get the same request scheduler, the same closed-loop concurrency, the same latency percentiles and
the same C++ client cost. Each point sends a fixed number of requests (--request-count): at the
latencies of a RoBERTa-large on 2 cores, stability windows would take minutes per point. In that
mode perf_analyzer divides by whole seconds, so throughput comes from its per-request timestamps
(--profile-export-file) instead; the latency percentiles are its own.

`Load.measure` adds what the server did over the point: its process tree's CPU and peak memory,
and the target's own counters (Triton's statistics, the workload's metrics).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from perf.engine.procstats import TreeMonitor, idle_detector
from perf.engine.targets import difference

STALL_S = 30.0


class PerfAnalyzerError(RuntimeError):
    """perf_analyzer is missing or cannot start."""


def binary() -> Path:
    """The wheel installs perf_analyzer beside the interpreter's scripts."""
    path = Path(sys.executable).parent / "perf_analyzer"
    if not path.is_file():
        raise PerfAnalyzerError(f"no perf_analyzer at {path}: install tritonclient[all]==2.51.0 (make the serve venv)")
    return path


def environment() -> dict[str, str]:
    """perf_analyzer links libcudart.so.12 even against a CPU server: take it from the CUDA runtime wheel."""
    spec = importlib.util.find_spec("nvidia.cuda_runtime")
    if spec is None or not spec.submodule_search_locations:
        raise PerfAnalyzerError("perf_analyzer needs libcudart.so.12: install nvidia-cuda-runtime-cu12")
    lib = Path(list(spec.submodule_search_locations)[0]) / "lib"
    env = os.environ.copy()
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(lib), env.get("LD_LIBRARY_PATH")]))
    return env


@dataclass
class Load:
    """One point: a closed loop of `concurrency` clients, or an open loop at `rate` requests/s."""

    requests: int
    concurrency: int | None = None
    rate: float | None = None

    def args(self) -> list[str]:
        mode = ["--concurrency-range", str(self.concurrency)] if self.rate is None else ["--request-rate-range", str(self.rate)]
        return [*mode, "--request-count", str(self.requests)]

    @property
    def label(self) -> str:
        return f"c={self.concurrency}" if self.rate is None else f"rate={self.rate:g}/s"

    def measure(self, target, inputs, out_dir: Path, name: str) -> dict:
        """The point with the server tree's CPU and peak memory and the target's counters over it.
        A run that stalls (see `run`) is run once more."""
        for _ in range(2):
            before = target.counters()
            with TreeMonitor(target.pids) as monitor:
                m = run(target.load_args(inputs), self, out_dir, name, stalled=idle_detector(target.pids, STALL_S))
            after = target.counters()
            if not (m.error or "").startswith("stalled"):
                break
            print(f"  {target.family} {self.label}: perf_analyzer {m.error}; running the point again", flush=True)
        return {
            **m.row(),
            "server_cpu_s": round(monitor.cpu_s, 2),
            "server_cpu_s_by_role": {k: round(v, 2) for k, v in monitor.cpu_s_by_role.items()},
            "peak_rss_mb": round(monitor.peak_rss / 2**20),
            **difference(after, before),
        }


def warm_up(target, inputs, requests: int, out_dir: Path, name: str) -> None:
    """First executions (session arenas, each bucket's shapes) are slow: keep them out of the numbers.
    A failure here shows again in the measurement that follows, so it is not checked."""
    run(target.load_args(inputs), Load(requests, concurrency=min(requests, 8)), out_dir, name)


@dataclass
class Measurement:
    concurrency: int | None
    rate: float | None
    requests: int
    throughput: float  # requests/s
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    avg_ms: float
    client_cpu_s: float  # perf_analyzer's own user+system CPU
    wall_s: float
    error: str | None = None

    def row(self) -> dict:
        return asdict(self)


def parse_csv(path: Path) -> dict[str, float]:
    """perf_analyzer's -f report: one row per load level, latencies in microseconds."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path} has no measurement row")
    row = rows[-1]
    us = lambda key: float(row[key]) / 1000.0  # noqa: E731
    p50 = us("p50 latency")
    return {
        "throughput": float(row["Inferences/Second"]),
        "p50_ms": p50,
        "p90_ms": us("p90 latency"),
        "p95_ms": us("p95 latency"),
        "p99_ms": us("p99 latency"),
        "avg_ms": us("Avg latency") if "Avg latency" in row else p50,
    }


def exact_throughput(path: Path) -> float:
    """Requests per second from the first request sent to the last response received. (The export also
    holds the responses' BYTES outputs, which perf_analyzer may cut inside a UTF-8 character, as it did
    with Chinese OCR lines: only the timestamps are read, so such bytes are replaced.)"""
    requests = json.loads(path.read_text(errors="replace"))["experiments"][-1]["requests"]
    start = min(r["timestamp"] for r in requests)
    end = max(r["response_timestamps"][-1] for r in requests if r["response_timestamps"])
    return len(requests) / ((end - start) / 1e9)


def last_error(log: str) -> str:
    lines = [line.strip() for line in log.splitlines()[1:] if line.strip()]  # the first line is the command
    specific = [line for line in lines if line.startswith(("Error", "Thread ["))]
    general = [line for line in lines if "failed" in line.lower()]
    return (specific or general or lines or ["perf_analyzer failed without output"])[0][:300]


def run(
    target_args: list[str],
    load: Load,
    out_dir: Path,
    name: str,
    timeout: float = 1800.0,
    stalled: Callable[[], bool] | None = None,
) -> Measurement:
    """Run one point and return what it measured; a failed run (any failed request) carries `error`.

    `stalled` is asked every second: perf_analyzer's HTTP client (the `openai` kind) now and then
    loses a response and would wait for it forever, so a run whose server has gone idle is stopped.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, log_path, export_path = (out_dir / f"{name}.{ext}" for ext in ("csv", "log", "json"))
    for stale in (csv_path, export_path):  # perf_analyzer will not overwrite its export file
        stale.unlink(missing_ok=True)
    command = [
        str(binary()),
        *target_args,
        "--async",
        *load.args(),
        "-f",
        str(csv_path),
        "--verbose-csv",
        "--profile-export-file",
        str(export_path),
    ]
    with open(log_path, "w") as log:
        log.write(" ".join(command) + "\n")
        log.flush()
        start = time.monotonic()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment())
        done, killed = threading.Event(), []

        def watchdog() -> None:
            while not done.wait(1.0):
                reason = "timed out" if time.monotonic() - start > timeout else "stalled" if stalled and stalled() else None
                if reason:
                    killed.append(f"{reason} after {time.monotonic() - start:.0f} s")
                    process.kill()
                    return

        threading.Thread(target=watchdog, daemon=True).start()
        _, status, usage = os.wait4(process.pid, 0)  # this child's own CPU time, not the whole family's
        done.set()
        process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    cpu = usage.ru_utime + usage.ru_stime
    empty = dict(throughput=0.0, p50_ms=0.0, p90_ms=0.0, p95_ms=0.0, p99_ms=0.0, avg_ms=0.0)
    if process.returncode != 0 or not csv_path.is_file():
        error = killed[0] if killed else last_error(log_path.read_text())
        return Measurement(load.concurrency, load.rate, load.requests, client_cpu_s=cpu, wall_s=wall, error=error, **empty)
    measured = {**parse_csv(csv_path), "throughput": exact_throughput(export_path)}
    return Measurement(load.concurrency, load.rate, load.requests, client_cpu_s=cpu, wall_s=wall, **measured)
