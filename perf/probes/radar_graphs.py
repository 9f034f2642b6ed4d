"""RADAR's graphs against each other offline, interleaved: is the fused or the INT8 graph faster here?

    python -m perf.probes.radar_graphs --model artifacts/radar-large --rounds 5
    python -m perf.probes.radar_graphs --graphs fp32 fused --levels basic all --ops --rounds 3

`make perf-precision` measures each graph's limit once, minutes apart, on a shared machine; a
difference of a few percent drowns there. This probe times the graphs in turns (fp32, fused, int8,
fp32, ...) on the same padded chunks as the limit (the committed CPU profile's buckets, `make
perf`'s texts), in both of the limit's layouts (one session with every core; one process per core
with 1 thread), and reports each graph's median chunks/s over the rounds and its ratio to FP32.

ONNX Runtime fuses on its own when it loads a graph: at the level the kit serves ("all") it applies
most of what the fused export does offline; "basic" leaves the transformer fusions out. `--levels`
times each graph at each level, and `--ops` counts the operators of the graph ONNX Runtime actually
runs at each (graph, level): that is where an offline fusion that gains nothing shows why.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import tempfile
from pathlib import Path

import onnx
import onnxruntime as ort

from kit.adapters.artifacts import radar_pipeline
from kit.runners.onnx import CPU, LEVELS, SERVED_LEVEL
from perf.engine.limit import CORES
from perf.probes.output import command_line, emit
from perf.workloads.radar import RADAR
from perf.workloads.radar_limit import chunk_rows, one_session, parallel_sessions
from samples.texts import sample_texts


def operators_run(path: Path, level: str) -> dict[str, int]:
    """Operator counts of the graph ONNX Runtime's CPU provider runs for `path` at `level` (it writes
    the graph it optimised; the weights are not read back)."""
    with tempfile.TemporaryDirectory(prefix="radar-ops-") as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = LEVELS[level]
        options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(str(path), options, providers=[CPU])
        graph = onnx.load(options.optimized_model_filepath, load_external_data=False).graph
    return dict(collections.Counter(node.op_type for node in graph.node).most_common())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=Path("artifacts/radar-large"), help="an export.radar --also-int8 folder")
    parser.add_argument("--graphs", nargs="+", help="precisions of export.json's `graphs` to time (default: all)")
    parser.add_argument("--levels", nargs="+", choices=list(LEVELS), default=[SERVED_LEVEL], help="ONNX Runtime levels")
    parser.add_argument("--ops", action="store_true", help="count the operators ONNX Runtime runs for each graph and level")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=32, help="chunks per timing (the first of the texts' chunks)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    # The graphs the export wrote and gated, by precision (export.json `graphs`), FP32 first.
    exported = {name: graph["file"] for name, graph in json.loads((args.model / "export.json").read_text())["graphs"].items()}
    unknown = set(args.graphs or []) - set(exported)
    if unknown:
        parser.error(f"{args.model} has no graph {sorted(unknown)} (export.json lists {sorted(exported)})")
    graphs = {name: file for name, file in exported.items() if name in (args.graphs or exported)}
    runs = {(name, level): args.model / file for name, file in graphs.items() for level in args.levels}
    key = {run: run[0] if args.levels == [SERVED_LEVEL] else f"{run[0]} at {run[1]}" for run in runs}
    baseline = key.get(("fp32", SERVED_LEVEL), key[next(iter(runs))])
    with tempfile.TemporaryDirectory(prefix="radar-graphs-") as work:
        settings = RADAR.settings(args.model, Path(work))
    rows = chunk_rows(radar_pipeline(args.model, settings), sample_texts(args.texts, 100, 800, seed=args.seed))[: args.chunks]
    layouts = {
        f"1 session x {CORES} threads": lambda path, level: one_session(path, rows, CORES, args.batch, level)[0],
        f"{CORES} sessions x 1 thread": lambda path, level: parallel_sessions(path, rows, CORES, args.batch, level)[0],
    }
    rates: dict[str, dict[str, list[float]]] = {layout: {key[run]: [] for run in runs} for layout in layouts}
    for round_ in range(args.rounds):
        for layout, rate in layouts.items():
            for run, path in runs.items():
                rates[layout][key[run]].append(rate(path, run[1]))
                print(f"round {round_ + 1} {layout} {key[run]}: {rates[layout][key[run]][-1]:.2f} chunks/s", flush=True)
    summary = {
        layout: {
            name: {
                "median_chunks_per_s": round(statistics.median(values), 3),
                "runs": [round(v, 3) for v in values],
                f"vs_{baseline.replace(' ', '_')}": round(statistics.median(values) / statistics.median(by_graph[baseline]), 3),
            }
            for name, values in by_graph.items()
        }
        for layout, by_graph in rates.items()
    }
    report = {
        "command": command_line("perf.probes.radar_graphs", argv),
        "model": str(args.model),
        "chunks": len(rows),
        "batch": args.batch,
        "bucket_count": settings.bucket_count,
        "graphs": graphs,
        "layouts": summary,
    }
    if args.ops:
        report["operators_run"] = {key[run]: operators_run(path, run[1]) for run, path in runs.items()}
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
