"""What the front door costs RADAR: the same texts through the door (`POST /v1/radar`, JSON over HTTP)
and straight to Triton's gRPC port, side by side on one server in one run.

    python -m perf.probes.door_overhead [--out perf/results/door/overhead.json]

Issue 16's targets: on the RoBERTa-large-shaped stand-in (--model) the door keeps >= 0.95x the direct
gRPC throughput at 16 and 64 clients; on the tiny stand-in (--tiny-model) it adds <= 2 ms to p50 at
1 client. Each model is served by a KitTarget (the CPU profile, RADAR's models only) with the door in
front of it, started as `make serve` starts it, its access log going to a file.

Both paths are closed loops on perf.engine.load.run_window: gRPC with tritonclient's asyncio client
(one connection, as the door itself talks to Triton), the door with aiohttp (a keep-alive connection
per client). At each load the windows go direct, door, direct, the door's twice as long: each path is
measured as long as the other, a linear drift of the shared cores cancels in door / mean(direct), and
the figures are medians over the two (direct, door) pairs. A window warms up for one cycle (clients /
the last measured rate), so that its measured answers waited behind a full queue as in steady state;
a direct window is long enough for --answers answers. The first window on each server warms it and
measures that rate; it is kept as `calibration`, not counted.

Short windows count few answers, and a RADAR batch finishes several at once, so answers per second
is a noisy throughput; each load also gives two steadier estimates of the same ratio: clients / mean
latency (Little's law for a closed loop, whose latencies each span a whole cycle), and Triton's CPU
rate (on saturated cores the door's and the client's CPU comes out of Triton's, and with it the
answers). The verdicts use answers per second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path

import aiohttp
import numpy as np
import psutil
import tritonclient.grpc.aio as aioclient

from kit.control.configs import REPO_ROOT
from kit.control.runtime import answers_ok, free_port
from perf.engine.load import Window, latency_row, run_window, tensor
from perf.engine.procstats import cpu_seconds
from perf.engine.targets import KitTarget, difference
from perf.probes.output import emit
from perf.workloads.radar import RADAR
from samples.texts import sample_texts

MIN_RATIO = 0.95  # door throughput / direct, at each load on the large model
MAX_ADDED_MS = 2.0  # door p50 - direct p50, at 1 client on the tiny model
MIN_WARMUP_S = 2.0  # a window's warm-up at least: connections opened, the first requests out of the measurement
CALIBRATION_S = 10.0  # the calibration window: long enough for a first rate on the large model
SCHEDULE = (("direct", 1), ("door", 2), ("direct", 1))  # each load's windows: path, length in direct windows
# The committed 30 s queue timeout lifted, as the RADAR sweeps lift it: at 64 clients texts wait longer on 2 cores.
SETTING = {model: {"default_timeout_microseconds": 600_000_000} for model in RADAR.models}
Sender = Callable[[int], Awaitable[None]]


@contextlib.contextmanager
def door_in_front(grpc_url: str, log: Path, timeout: float = 120.0) -> Iterator[tuple[str, int]]:
    """`python -m door` on a free port in front of `grpc_url`, once it says ready: its URL and pid."""
    url = f"http://127.0.0.1:{free_port()}"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "door", "--triton", grpc_url, "--port", url.rsplit(":", 1)[1], "--wait", "60"],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + timeout
        while not answers_ok(f"{url}/health/ready"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the door did not get ready; see {log}")
            time.sleep(0.2)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(30)


@contextlib.asynccontextmanager
async def direct(grpc_url: str, texts: list[str]) -> AsyncIterator[Sender]:
    """send(i): text i (modulo) to Triton's `radar` as its TEXT tensor."""
    client = aioclient.InferenceServerClient(grpc_url)
    arrays = [np.array([text.encode("utf-8")], dtype=np.object_) for text in texts]

    async def send(index: int) -> None:
        await client.infer(RADAR.entry, [tensor("TEXT", arrays[index % len(arrays)])])

    try:
        yield send
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def through_door(door_url: str, texts: list[str]) -> AsyncIterator[Sender]:
    """send(i): text i (modulo) to the door's `POST /v1/radar`; any status but 200 fails the request."""
    bodies = [json.dumps({"text": text}).encode() for text in texts]
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def send(index: int) -> None:
            async with session.post(f"{door_url}/v1/radar", data=bodies[index % len(bodies)], headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")

        yield send


def snapshot(triton_pid: int, door_pid: int) -> dict:
    own = psutil.Process().cpu_times()
    return {
        "time": time.perf_counter(),
        "client_cpu_s": own.user + own.system,
        "triton_cpu_s": cpu_seconds(triton_pid),
        "door_cpu_s": cpu_seconds(door_pid),
    }


def measure(path: str, sender: Callable[[], contextlib.AbstractAsyncContextManager], window: Window, snap) -> dict:
    """One window of `path` ("direct" or "door"): latency_row's figures, clients / mean latency, and
    Triton's and the door's CPU."""

    async def run() -> tuple[list[float], int, dict, dict]:
        async with sender() as send:
            return await run_window(send, window, snap)

    latencies, errors, start, end = asyncio.run(run())
    if not latencies:
        raise RuntimeError(f"{path} at {window.concurrency} clients: no answer in the measured window ({errors} failed)")
    over = difference(end, start)
    row = latency_row(window, latencies, errors, over["time"], over["client_cpu_s"])
    row |= {
        "path": path,
        "warmup_s": round(window.warmup_s, 1),
        "throughput_by_latency": window.concurrency * 1000 / row["avg_ms"],
        **{k: over[k] for k in ("triton_cpu_s", "door_cpu_s")},
    }
    print(
        f"  {path:<6} c={window.concurrency:<3} {row['throughput']:8.2f} texts/s  p50 {row['p50_ms']:9.1f} ms  "
        f"p99 {row['p99_ms']:9.1f} ms  ({row['requests']} answers in {row['wall_s']:.0f} s"
        f"{'; ' + row['error'] if row['error'] else ''})",
        file=sys.stderr,
        flush=True,
    )
    return row


def median(values: list[float]) -> float:
    return float(np.median(values))


def paired(clients: int, windows: list[dict]) -> dict:
    """A load's figures from its windows (direct, door, direct): each path's medians, and the medians
    over the two (direct, door) pairs of the ratios and of the p50 added."""
    door = next(w for w in windows if w["path"] == "door")
    directs = [w for w in windows if w["path"] == "direct"]

    def ratio(figure: Callable[[dict], float]) -> float:
        return median([figure(door) / figure(direct) for direct in directs])

    return {
        "clients": clients,
        "direct": {key: median([w[key] for w in directs]) for key in ("throughput", "p50_ms", "p99_ms")},
        "door": {key: door[key] for key in ("throughput", "p50_ms", "p99_ms")},
        "throughput_ratio": ratio(lambda w: w["throughput"]),
        "pair_ratios": [door["throughput"] / direct["throughput"] for direct in directs],
        "ratio_by_latency": ratio(lambda w: w["throughput_by_latency"]),
        "ratio_by_triton_cpu": ratio(lambda w: w["triton_cpu_s"] / w["wall_s"]),
        "p50_added_ms": median([door["p50_ms"] - direct["p50_ms"] for direct in directs]),
        "door_cpu_ms_per_request": door["door_cpu_s"] * 1000 / door["requests"],
        "errors": [w["error"] for w in windows if w["error"]],
        "windows": windows,
    }


def measure_model(name: str, model: Path, loads: list[int], texts: list[str], args: argparse.Namespace) -> dict:
    """RADAR on `model` (a folder, from the repository root) with the door in front: a calibration
    window, then each load's windows."""
    model_dir = (REPO_ROOT / model).resolve()
    target = KitTarget(RADAR, SETTING, model_dir, args.work / name)
    print(f"{name}: starting Triton on {model_dir} ...", file=sys.stderr, flush=True)
    target.start()
    try:
        with door_in_front(target.grpc_url, target.workdir / "door.log") as (door_url, door_pid):
            senders = {"direct": partial(direct, target.grpc_url, texts), "door": partial(through_door, door_url, texts)}
            snap = partial(snapshot, target.pid, door_pid)
            calibration = measure("direct", senders["direct"], Window(loads[0], MIN_WARMUP_S, CALIBRATION_S), snap)
            rate, points = calibration["throughput"], []
            for clients in loads:
                warmup, seconds = max(MIN_WARMUP_S, clients / rate), max(args.min_window_s, args.answers / rate)
                windows = [measure(path, senders[path], Window(clients, warmup, n * seconds), snap) for path, n in SCHEDULE]
                rate = median([w["throughput"] for w in windows])
                points.append(paired(clients, windows))
    finally:
        target.stop()
    return {"name": name, "model": str(model), "kit": target.label, "calibration": calibration, "points": points}


def judged(large: dict, tiny: dict) -> list[dict]:
    """Issue 16's targets, each met or missed by the numbers (a load with a failed request misses)."""
    verdicts = [
        {
            "target": f"{p['clients']} clients, large model: door >= {MIN_RATIO}x direct gRPC throughput",
            "value": f"{p['throughput_ratio']:.3f}x",
            "met": p["throughput_ratio"] >= MIN_RATIO and not p["errors"],
        }
        for p in large["points"]
    ]
    verdicts += [
        {
            "target": f"{p['clients']} client{'s' * (p['clients'] > 1)}, tiny model: p50 added <= {MAX_ADDED_MS:g} ms",
            "value": f"{p['p50_added_ms']:.2f} ms",
            "met": p["p50_added_ms"] <= MAX_ADDED_MS and not p["errors"],
        }
        for p in tiny["points"]
    ]
    return verdicts


def ms(value: float) -> str:
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.0f}"


def markdown(report: dict) -> str:
    """The summary a person reads: how it was run, the targets judged, each model's table."""
    machine, texts = report["machine"], report["texts"]
    lines = [
        "# The front door's cost on RADAR",
        "",
        f"Written by `{report['command']}` with the JSON beside it; issue 16's targets, docs/DOOR.md.",
        "",
        f"- Machine: {machine['cores']} cores, {machine['platform']}; load average {machine['load_before']} at the start and "
        f"{machine['load_after']} at the end; started {report['started']}, took {report['took_s'] / 60:.1f} min.",
        f"- Texts: {texts['count']} of {texts['min_chars']}-{texts['max_chars']} characters (samples.texts, seed "
        f"{texts['seed']}), the same for both paths and both models.",
        '- Direct: tritonclient\'s asyncio gRPC client to `radar`. Door: aiohttp `POST /v1/radar` with `{"text": ...}`, a '
        "keep-alive connection per client, the door in front of the same Triton (access log on).",
        "- Per load, windows direct, door, direct, the door's twice as long; each figure is the median over the two "
        f"(direct, door) pairs. A window warms up for one cycle (clients / last rate, at least {MIN_WARMUP_S:g} s); a direct "
        f"window then measures at least {report['min_window_s']:g} s and {report['answers']} answers at the last rate.",
        "- door / direct: answers per second (the verdicts), then two steadier estimates of the same ratio: clients / mean "
        "latency, and Triton's CPU rate (on saturated cores, what the door and the client take comes out of Triton's).",
        "",
        "## Targets",
        "",
        *(f"- **{v['target']}**: {v['value']} -> **{'met' if v['met'] else 'missed'}**" for v in report["targets"]),
    ]
    header = (
        "| clients | direct texts/s | door texts/s | door / direct (pairs) | by mean latency | by Triton CPU | direct p50 ms "
        "| door p50 ms | p50 added ms | direct p99 ms | door p99 ms | door CPU ms / request | failed |"
    )
    for model in report["models"]:
        lines += ["", f"## {model['name']}: `{model['model']}` ({model['kit']})", "", header, "| --- " * 13 + "|"]
        for p in model["points"]:
            d, g, pairs = p["direct"], p["door"], ", ".join(f"{r:.3f}" for r in p["pair_ratios"])
            lines.append(
                f"| {p['clients']} | {d['throughput']:.2f} | {g['throughput']:.2f} | {p['throughput_ratio']:.3f} ({pairs}) "
                f"| {p['ratio_by_latency']:.3f} | {p['ratio_by_triton_cpu']:.3f} | {ms(d['p50_ms'])} | {ms(g['p50_ms'])} "
                f"| {ms(p['p50_added_ms'])} | {ms(d['p99_ms'])} | {ms(g['p99_ms'])} | {p['door_cpu_ms_per_request']:.2f} "
                f"| {'; '.join(p['errors']) or 0} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=Path("artifacts/radar-large"), help="the throughput target's model")
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64], help="its loads")
    parser.add_argument("--tiny-model", type=Path, default=Path("artifacts/radar"), help="the latency target's model")
    parser.add_argument("--tiny-clients", type=int, nargs="+", default=[1], help="its loads")
    parser.add_argument("--texts", type=int, default=32, help="texts of 100-800 characters, sent in turn by every client")
    parser.add_argument("--answers", type=int, default=36, help="answers a direct window is long enough for, at the last rate")
    parser.add_argument("--min-window-s", type=float, default=5.0, help="a direct window's shortest measured length")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "perf" / "door-overhead")
    parser.add_argument("--out", type=Path, help="also write the JSON here, and the Markdown summary beside it (.md)")
    args = parser.parse_args(argv)
    texts = {"count": args.texts, "min_chars": 100, "max_chars": 800, "seed": 42}
    sample = sample_texts(texts["count"], texts["min_chars"], texts["max_chars"], seed=texts["seed"])
    started, load_before = time.time(), os.getloadavg()
    large = measure_model("large", args.model, args.clients, sample, args)
    tiny = measure_model("tiny", args.tiny_model, args.tiny_clients, sample, args)
    report = {
        "command": " ".join(["python", "-m", "perf.probes.door_overhead", *(argv if argv is not None else sys.argv[1:])]),
        "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)),
        "took_s": round(time.time() - started),
        "machine": {
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "texts": texts,
        "answers": args.answers,
        "min_window_s": args.min_window_s,
        "targets": judged(large, tiny),
        "models": [large, tiny],
    }
    emit(report, args.out)
    summary = markdown(report)
    print(summary, file=sys.stderr)
    if args.out:
        args.out.with_suffix(".md").write_text(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
