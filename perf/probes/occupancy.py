"""How busy a batched model's instances are while requests wait: Triton's own request traces.

    python -m perf.probes.occupancy --spec full --variants 0 1 2 --concurrency 16 --requests 64
    python -m perf.probes.occupancy --setting '{"radar_classifier": {"instances": 2, "threads": 1}}'

Throughput on shared cores is noisy; this asks a sharper question of each kit variant in the spec:
while a request of the model sat in its queue, how often was an instance idle? Triton traces every
request (`--trace-config level=TIMESTAMPS rate=1`: QUEUE_START, COMPUTE_START, COMPUTE_END per
request, BLS requests included); requests of one batch share their compute timestamps, so equal
(start, end) pairs are one execution. The sweep-line over those intervals gives each instance's
busy share and the stall: time with an instance idle and a request queued, which is pure
scheduling loss on a CPU-bound server.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kit.adapters.artifacts import text_pipeline
from kit.control.configs import REPO_ROOT
from perf.engine import perf_analyzer
from perf.engine.spec import load_spec
from perf.engine.targets import make_target
from perf.probes.output import command_line, emit
from perf.workloads.radar import RADAR, radar_inputs


def trace_args(path: Path) -> list[str]:
    return [
        "--trace-config",
        f"triton,file={path}",
        "--trace-config",
        "level=TIMESTAMPS",
        "--trace-config",
        "rate=1",
        "--trace-config",
        "count=-1",
        "--trace-config",
        "log_frequency=0",
    ]


def traced_requests(path: Path, model: str) -> list[dict[str, int]]:
    """Timestamps (ns) by name of every traced request of `model`; Triton writes one trace in pieces."""
    merged: dict[int, dict] = {}
    for entry in json.loads(path.read_text()):
        trace = merged.setdefault(entry["id"], {"model": None, "ns": {}})
        trace["model"] = entry.get("model_name", trace["model"])
        for stamp in entry.get("timestamps", []):
            trace["ns"].setdefault(stamp["name"], stamp["ns"])
    wanted = ("QUEUE_START", "COMPUTE_START", "COMPUTE_END")
    return [t["ns"] for t in merged.values() if t["model"] == model and all(k in t["ns"] for k in wanted)]


@dataclass
class Occupancy:
    requests: int
    executions: int
    requests_per_execution: float
    window_s: float  # first queued request to last compute end
    busy_per_instance: float  # executing share of the window, averaged over instances
    stalled_s: float  # an instance idle while a request waited in the queue
    stalled_share: float
    longest_stall_ms: float


def occupancy(requests: list[dict[str, int]], instances: int) -> Occupancy:
    if not requests:
        raise ValueError("no traced request of the model")
    executions = sorted({(r["COMPUTE_START"], r["COMPUTE_END"]) for r in requests})
    events: list[tuple[int, int, int]] = []  # (time, running delta, queued delta)
    for start, end in executions:
        events += [(start, 1, 0), (end, -1, 0)]
    for r in requests:
        events += [(r["QUEUE_START"], 0, 1), (r["COMPUTE_START"], 0, -1)]
    events.sort()
    running = queued = 0
    stalled = longest = current = 0
    previous = events[0][0]
    for at, run_delta, queue_delta in events:
        if running < instances and queued > 0:
            stalled += at - previous
            current += at - previous
        elif at > previous:
            longest, current = max(longest, current), 0
        running, queued, previous = running + run_delta, queued + queue_delta, at
    longest = max(longest, current)
    window = max(end for _, end in executions) - min(r["QUEUE_START"] for r in requests)
    busy = sum(end - start for start, end in executions)
    return Occupancy(
        len(requests),
        len(executions),
        len(requests) / len(executions),
        window / 1e9,
        busy / instances / window,
        stalled / 1e9,
        stalled / window,
        longest / 1e6,
    )


def measure_variant(setting: dict, spec: dict, model: str, concurrency: int, requests: int, work: Path) -> dict:
    model_dir = (REPO_ROOT / spec["model"]).resolve()
    inputs = radar_inputs(
        work / "inputs", spec["inputs"][0], text_pipeline(model_dir, RADAR.settings(model_dir, work / "kit-settings"))
    )
    target = make_target(RADAR, "kit", setting, model_dir, work)
    trace = target.workdir / "trace.json"
    trace.unlink(missing_ok=True)
    target.server_args = trace_args(trace)
    target.start()
    try:
        perf_analyzer.warm_up(target, inputs, 4, work / "pa", "occupancy-warmup")
        warm_end_ns = time.monotonic_ns()  # Triton stamps traces with the same monotonic clock
        m = perf_analyzer.run(
            target.load_args(inputs), perf_analyzer.Load(requests, concurrency=concurrency), work / "pa", "occupancy"
        )
    finally:
        target.stop()
    instances = int(target.placements[model].get("instances", 1))
    occupied = occupancy([r for r in traced_requests(trace, model) if r["QUEUE_START"] >= warm_end_ns], instances)
    return {
        "setting": target.label,
        "model": model,
        "instances": instances,
        "texts_per_s": m.throughput,
        "p99_ms": m.p99_ms,
        "error": m.error,
        **asdict(occupied),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="full", help="a RADAR spec: its first input set and its kit settings")
    parser.add_argument("--variants", type=int, nargs="+", help="indices into the spec's kit settings (default: all)")
    parser.add_argument(
        "--setting",
        type=json.loads,
        action="append",
        default=[],
        help='a kit variant of its own, as JSON: \'{"radar_classifier": {"instances": 2, "threads": 1}}\'',
    )
    parser.add_argument("--model", default="radar_classifier")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "perf" / "occupancy")
    parser.add_argument("--out", type=Path, help="also write the rows here as JSON")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    chosen = (
        spec["targets"]["kit"]
        if args.variants is None and not args.setting
        else [spec["targets"]["kit"][i] for i in args.variants or []]
    )
    rows = []
    for setting in chosen + args.setting:
        row = measure_variant(setting, spec, args.model, args.concurrency, args.requests, args.work)
        rows.append(row)
        print(
            f"{row['setting']:<56} {row['texts_per_s']:.2f} texts/s  busy {row['busy_per_instance']:.1%}  "
            f"stalled {row['stalled_share']:.1%} (longest {row['longest_stall_ms']:.0f} ms)  "
            f"{row['requests_per_execution']:.1f} requests/execution",
            file=sys.stderr,
            flush=True,
        )
    emit(
        {
            "command": command_line("perf.probes.occupancy", argv),
            "concurrency": args.concurrency,
            "requests": args.requests,
            "rows": rows,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
