"""The served kit against the limit of the same graph, in turns: how close does the kit come?

    python -m perf.probes.kit_vs_limit --graph model.fused.onnx --rounds 3
    python -m perf.probes.kit_vs_limit --clients 16 --setting '{}' --setting '{"radar": {"instances": 16}}'

`make perf-precision` measures a graph's limit once and the kit's points minutes later; on these
shared cores the two drift apart by as much as the gap being judged (the same kit point measured
twice in one run has differed by 15%). This probe keeps kit servers running (the committed CPU
profile serving `--graph`, and each `--setting` over it: variants are compared in the same turns)
and alternates, round after round: the limit in both its layouts on the same chunks, then each kit
at each load. Each round's kit figure is set against that round's best limit; the report holds
every round and the median ratio per kit and load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from kit.adapters.artifacts import radar_pipeline
from perf.engine.perf_analyzer import Load, warm_up
from perf.engine.point import measure
from perf.engine.targets import make_target, merged
from perf.probes.output import command_line, emit
from perf.workloads import radar_limit
from perf.workloads.radar import RADAR, radar_inputs

TIMEOUTS = {"default_timeout_microseconds": 600_000_000}  # make perf's: a slow point is measured, not refused
KEPT = (RADAR.key, "p99_ms", "server_cpu_s", "server_cpu_s_by_role", "wall_s", "peak_rss_mb", "error")  # of each kit point


def one_round(index: int, targets: list, inputs, graph: Path, pipeline, settings, args, work: Path) -> dict:
    """The limit in both layouts, then every kit at every load, the kits in rotated order so that none
    always runs first; figures in chunks/s."""
    limit = radar_limit.measure(graph, pipeline, inputs.items, None, [8], settings.bucket_count)
    best = limit["best"]["chunks_per_s"]
    print(f"round {index + 1}: limit {best:.2f} chunks/s ({limit['best']['layout']})", flush=True)
    kits = {}
    shift = index % len(targets)
    for target in targets[shift:] + targets[:shift]:
        served = kits[target.label] = {}
        for c in args.clients:
            load = Load(max(args.per_client * c, 64), concurrency=c)
            row = measure(target, inputs, load, work / "pa", f"r{index}-{targets.index(target)}-c{c}")
            served[c] = {k: row[k] for k in KEPT}
            print(f"round {index + 1}: {target.label} at {c} clients {row[RADAR.key] / best:.2f} x the limit", flush=True)
    layouts = {r["layout"]: round(r["chunks_per_s"], 3) for r in limit["layouts"]}
    return {"limit": layouts, "limit_best": round(best, 3), "kit": kits}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=Path("artifacts/radar-large"))
    parser.add_argument("--graph", default="model.fused.onnx", help="the ONNX file of the model folder that both run")
    parser.add_argument(
        "--setting",
        type=json.loads,
        action="append",
        help='a kit variant over the committed profile, e.g. {"radar": {"instances": 16}}; repeat to compare (default: {})',
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--per-client", type=int, default=2, help="requests per client and point")
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    model = args.model.resolve()
    base = {"radar": TIMEOUTS, "radar_classifier": {"graph": args.graph, **TIMEOUTS}}
    kit_settings = [merged(base, setting) for setting in args.setting or [{}]]
    texts = {"name": "long", "count": args.texts, "min_chars": 100, "max_chars": 800, "seed": args.seed}
    with tempfile.TemporaryDirectory(prefix="kit-vs-limit-") as tmp:
        work = Path(tmp)
        settings = RADAR.settings(model, work / "kit-settings", kit_settings[0])
        pipeline = radar_pipeline(model, settings)
        inputs = radar_inputs(work / "inputs", texts, pipeline)
        targets = [make_target(RADAR, "kit", setting, model, work) for setting in kit_settings]
        if len({target.label for target in targets}) < len(targets):
            parser.error("two --setting values make the same kit")
        try:
            for target in targets:
                target.start()
                warm_up(target, inputs, 8, work / "pa", "warmup")
            graph = model / args.graph
            rounds = [one_round(i, targets, inputs, graph, pipeline, settings, args, work) for i in range(args.rounds)]
        finally:
            for target in targets:
                target.stop()
    ratios = {
        target.label: {
            str(c): [
                r["kit"][target.label][c]["chunks_per_s"] / r["limit_best"]
                for r in rounds
                if not r["kit"][target.label][c]["error"]
            ]
            for c in args.clients
        }
        for target in targets
    }
    command = command_line("perf.probes.kit_vs_limit", argv)
    emit(
        {
            "command": command,
            "model": str(args.model),
            "graph": args.graph,
            "kits": [target.label for target in targets],
            "rounds": rounds,
            "median_kit_over_limit": {
                kit: {c: round(statistics.median(v), 3) if v else None for c, v in by_load.items()}
                for kit, by_load in ratios.items()
            },
            "kit_over_limit": {kit: {c: [round(x, 3) for x in v] for c, v in by_load.items()} for kit, by_load in ratios.items()},
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
