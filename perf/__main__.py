"""The perf kit's command line: run a sweep spec, or regenerate the reports from committed results.

    python -m perf sweep --spec full --out perf/results/radar       # make perf
    python -m perf sweep --spec quick                               # make perf-quick: build/perf/results-quick
    python -m perf report                                           # every perf/results/<workload>/REPORT.md, and perf/RESULTS.md

A spec's `workload` (perf.workloads: radar, radar-precision, ocr, resnet) picks the inputs, the kit's models and the
baselines. A sweep writes results.json, sweeps.csv, probes.csv, plots and REPORT.md into --out; when
--out is the workload's folder under perf/results/, the index perf/RESULTS.md is regenerated too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from kit.control.configs import REPO_ROOT
from perf.engine import report, sweep
from perf.engine.spec import load_spec
from perf.workloads import WORKLOADS


def committed() -> list[tuple]:
    """(workload, results, report) of every run under perf/results/, in the registry's order."""
    return [
        (w, json.loads((report.RESULTS / w.name / "results.json").read_text()), report.RESULTS / w.name / "REPORT.md")
        for w in WORKLOADS.values()
        if (report.RESULTS / w.name / "results.json").is_file()
    ]


def run_sweep(args: argparse.Namespace, argv: list[str]) -> int:
    spec = load_spec(args.spec)
    spec["path"] = os.path.relpath(spec["path"], REPO_ROOT)
    w = WORKLOADS[spec.get("workload", "radar")]
    if args.max_concurrency:
        for loads in [spec["sweep"], *spec["extra"].values()]:
            loads["concurrency"] = [c for c in loads.get("concurrency", []) if c <= args.max_concurrency]
    out = args.out or REPO_ROOT / "build" / "perf" / f"results-{Path(spec['path']).stem}"
    results = sweep.run(w, spec, args.work / Path(spec["path"]).stem, args.families, argv)
    sweep.write_results(results, out)
    print(f"report: {report.write_report(results, w, out)} ({results['minutes']} min)")
    if out.resolve() == (report.RESULTS / w.name).resolve():
        print(f"index: {report.write_index(committed())}")
    return 0


def regenerate() -> int:
    for w, results, path in committed():
        print(f"report: {report.write_report(results, w, path.parent)}")
    print(f"index: {report.write_index(committed())}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m perf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("sweep", help="run a spec: the kit, its baselines and the limit")
    s.add_argument("--spec", default="quick", help="a name under perf/specs/ or a path")
    s.add_argument("--out", type=Path, help="results, plots and REPORT.md (default: build/perf/results-<spec>)")
    s.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "perf", help="repositories, logs, raw perf_analyzer files")
    s.add_argument("--families", nargs="+", help="only these target families")
    s.add_argument("--max-concurrency", type=int, help="leave out the spec's loads above this many clients")
    commands.add_parser("report", help="regenerate every committed REPORT.md and perf/RESULTS.md from their results.json")
    args = parser.parse_args(argv)
    if args.command == "report":
        return regenerate()
    try:
        return run_sweep(args, argv)
    except FileNotFoundError as exc:  # no spec, or no exported model
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
