"""RADAR's graphs against each other offline, interleaved: is the fused or the INT8 graph faster here?

    python -m perf.probes.radar_graphs --model artifacts/radar-large --rounds 5

`make perf-precision` measures each graph's limit once, minutes apart, on a shared machine; a
difference of a few percent drowns there. This probe times the graphs in turns (fp32, fused, int8,
fp32, ...) on the same padded chunks as the limit (the committed CPU profile's buckets, `make
perf`'s texts), in both of the limit's layouts (one session with every core; one process per core
with 1 thread), and reports each graph's median chunks/s over the rounds and its ratio to FP32.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from kit.adapters.artifacts import radar_pipeline
from perf.engine.limit import CORES
from perf.probes.output import command_line, emit
from perf.workloads.radar import RADAR
from perf.workloads.radar_limit import chunk_rows, one_session, parallel_sessions
from samples.texts import sample_texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=Path("artifacts/radar-large"), help="an export.radar --also-int8 folder")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=32, help="chunks per timing (the first of the texts' chunks)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    # The graphs the export wrote and gated, by precision (export.json `graphs`), FP32 first.
    graphs = {name: graph["file"] for name, graph in json.loads((args.model / "export.json").read_text())["graphs"].items()}
    with tempfile.TemporaryDirectory(prefix="radar-graphs-") as work:
        settings = RADAR.settings(args.model, Path(work))
    rows = chunk_rows(radar_pipeline(args.model, settings), sample_texts(args.texts, 100, 800, seed=args.seed))[: args.chunks]
    layouts = {
        f"1 session x {CORES} threads": lambda path: one_session(path, rows, CORES, args.batch)[0],
        f"{CORES} sessions x 1 thread": lambda path: parallel_sessions(path, rows, CORES, args.batch)[0],
    }
    rates: dict[str, dict[str, list[float]]] = {layout: {name: [] for name in graphs} for layout in layouts}
    for round_ in range(args.rounds):
        for layout, rate in layouts.items():
            for name, file in graphs.items():
                rates[layout][name].append(rate(args.model / file))
                print(f"round {round_ + 1} {layout} {name}: {rates[layout][name][-1]:.2f} chunks/s", flush=True)
    summary = {
        layout: {
            name: {
                "median_chunks_per_s": round(statistics.median(values), 3),
                "runs": [round(v, 3) for v in values],
                "vs_fp32": round(statistics.median(values) / statistics.median(by_graph["fp32"]), 3),
            }
            for name, values in by_graph.items()
        }
        for layout, by_graph in rates.items()
    }
    command = command_line("perf.probes.radar_graphs", argv)
    emit(
        {
            "command": command,
            "model": str(args.model),
            "chunks": len(rows),
            "batch": args.batch,
            "bucket_count": settings.bucket_count,
            "graphs": graphs,
            "layouts": summary,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
