"""The perf kit's command line: run a sweep spec, or regenerate the reports from committed results.

    python -m perf sweep --spec full --out perf/results/radar       # make perf
    python -m perf sweep --spec quick                               # make perf-quick: build/perf/results-quick
    python -m perf sweep --spec gpu --deadline T --out DIR          # the GPU run (deploy/gpu-host/run.sh)
    python -m perf sweep --model NAME                               # a model from its spec: build/perf/models/NAME
    python -m perf report                                           # every perf/results/<workload>/REPORT.md, and perf/RESULTS.md
    python -m perf chaos [--seconds 1200] [--seed 40]               # make chaos: faults under load (perf.chaos)

A spec's `workload` (perf.workloads: radar, ocr, resnet) picks the inputs, the kit's models and the
baselines; `--model NAME` measures the model of models/NAME.toml, or of a shipped spec (radar), instead (an onnx spec's
by perf.workloads.tensor
and perf/specs/model.json, a text-classification spec's by perf.workloads.text and perf/specs/model-text.json, an
image-classification spec's by perf.workloads.image and perf/specs/model-image.json, one of pixels by
perf.workloads.pixels and perf/specs/model-pixels.json, a text-ranking or token-classification spec's by
perf.workloads.chunked and perf/specs/model-chunked.json, a pipeline spec's by perf.workloads.pipeline and
perf/specs/model.json, or model-unbatched.json for one of max_batch_size 0, unless --spec names another).
A sweep writes results.json, sweeps.csv, probes.csv, plots and REPORT.md into --out; when --out is the workload's
folder under perf/results/, the index perf/RESULTS.md is regenerated too. A suite spec runs each of its specs into a
subfolder of --out and writes an index of them there. The command exits 1 when a step failed or was skipped (a
deadline too near, a server that did not start).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

from kit.control.configs import REPO_ROOT, SOURCE
from kit.control.specs import MODELS, read_specs
from kit.control.tasks import shipped_specs
from perf.engine import report, sweep
from perf.engine.budget import Budget
from perf.engine.spec import load_spec
from perf.engine.targets import merged
from perf.engine.workload import Workload
from perf.probes.output import command_line
from perf.workloads import WORKLOADS
from perf.workloads.chunked import ChunkedModelWorkload
from perf.workloads.image import ImageModelWorkload
from perf.workloads.pipeline import PipelineModelWorkload
from perf.workloads.pixels import PixelsWorkload
from perf.workloads.tensor import TensorModelWorkload
from perf.workloads.text import TextModelWorkload

MODEL_WORKLOAD = "model"  # perf/specs/model.json's: the workload comes from --model
MODEL_WORKLOADS = {  # by the spec's task
    "onnx": TensorModelWorkload,
    "text-classification": TextModelWorkload,
    "feature-extraction": TextModelWorkload,
    "text-ranking": ChunkedModelWorkload,
    "token-classification": ChunkedModelWorkload,
    "image-classification": ImageModelWorkload,
    "pipeline": PipelineModelWorkload,
}


def committed() -> list[tuple]:
    """(workload, results, report) of every run under perf/results/, in the registry's order."""
    return [
        (w, json.loads((report.RESULTS / w.name / "results.json").read_text()), report.RESULTS / w.name / "REPORT.md")
        for w in WORKLOADS.values()
        if (report.RESULTS / w.name / "results.json").is_file()
    ]


def run_one(
    spec: dict, out: Path, work: Path, args: argparse.Namespace, argv: list[str], budget: Budget, w: Workload | None = None
) -> dict:
    """One spec into `out` (on workload `w`, else the one the spec names): its results, CSVs, plots and report."""
    w = w or WORKLOADS[spec.get("workload", "radar")]
    if args.max_concurrency:
        for loads in [spec["sweep"], *spec["extra"].values()]:
            loads["concurrency"] = [c for c in loads.get("concurrency", []) if c <= args.max_concurrency]
    budget.estimates.update(spec.get("budget", {}))
    results = sweep.run(w, spec, work, args.families, argv, budget, out)
    sweep.write_results(results, out)
    print(f"report: {report.write_report(results, w, out)} ({results['minutes']} min)")
    if out.resolve() == (report.RESULTS / w.name).resolve():
        print(f"index: {report.write_index(committed())}")
    return results


def failed(results: list[dict]) -> bool:
    """Whether a step failed or was skipped, each said on stderr."""
    for r in results:
        for problem in r["errors"]:
            print(f"failed: {problem['what']}: {problem['error']}", file=sys.stderr)
        for step in r["skipped"]:
            print(f"skipped: {step['what']} ({step['why']})", file=sys.stderr)
    return any(r["errors"] or r["skipped"] for r in results)


def run_model(args: argparse.Namespace, argv: list[str]) -> int:
    """`--model NAME`: the spec's model against the hand-rolled designs on the same graph."""
    specs = read_specs(args.models) | shipped_specs(SOURCE)  # the kit's own specs too (model_repository/radar.toml)
    if args.model not in specs:
        print(
            f"error: no spec {args.model!r} in {args.models} (there: {sorted(specs) or 'none'}); see docs/MODELS.md",
            file=sys.stderr,
        )
        return 2
    chosen = specs[args.model]
    if chosen.task == "pipeline" and chosen.shipped:
        print(
            f"error: {args.model} is one of the kit's own pipelines, whose requests (images) random tensors cannot stand "
            "for: its workload is its own (make perf-ocr)",
            file=sys.stderr,
        )
        return 2
    w = PixelsWorkload(chosen) if chosen.input == "pixels" else MODEL_WORKLOADS[chosen.task](chosen)
    spec = load_spec(args.spec or w.sweep_spec)
    spec["path"] = os.path.relpath(spec["path"], REPO_ROOT)
    spec["model"] = os.path.relpath(w.folder, REPO_ROOT)  # the report names it as the command did
    out = args.out or REPO_ROOT / "build" / "perf" / "models" / args.model
    budget = Budget(args.deadline or (time.time() + args.budget if args.budget else None))
    return int(failed([run_one(merged(spec, args.override), out, args.work / "models" / args.model, args, argv, budget, w)]))


def run_sweep(args: argparse.Namespace, argv: list[str]) -> int:
    if args.model:
        return run_model(args, argv)
    spec = load_spec(args.spec or "quick")
    name = Path(spec["path"]).stem
    spec["path"] = os.path.relpath(spec["path"], REPO_ROOT)
    out = args.out or REPO_ROOT / "build" / "perf" / f"results-{name}"
    deadline = args.deadline or (time.time() + args.budget if args.budget else None)
    budget = Budget(deadline)
    if spec.get("workload") == MODEL_WORKLOAD:
        print(f"error: {spec['path']} measures a model from its spec: pass --model NAME", file=sys.stderr)
        return 2
    if "suite" not in spec:
        return int(failed([run_one(merged(spec, args.override), out, args.work / name, args, argv, budget)]))
    runs, broken = {}, []
    for part, part_spec in spec["suite"].items():
        part_spec = merged(part_spec, args.override) | {"path": f"{spec['path']}#{part}"}
        try:
            runs[part] = run_one(part_spec, out / part, args.work / name / part, args, argv, budget)
        except Exception:  # one part that cannot run (no model, a config the builder refuses) leaves the others theirs
            traceback.print_exc()
            broken.append(part)
    reports = [(WORKLOADS[r["workload"]], r, out / part / "REPORT.md") for part, r in runs.items()]
    print(f"index: {report.write_index(reports, out / 'REPORT.md', title=spec.get('title'))}")
    for part in broken:
        print(f"failed: the suite's part {part!r} did not run (see above)", file=sys.stderr)
    return int(failed(list(runs.values())) or bool(broken))


def regenerate() -> int:
    """Every report under perf/results/ (the workloads' and the extras' runs), then the index."""
    for path in sorted(report.RESULTS.rglob("results.json")):
        results = json.loads(path.read_text())
        if results.get("workload") in WORKLOADS:
            print(f"report: {report.write_report(results, WORKLOADS[results['workload']], path.parent)}")
    print(f"index: {report.write_index(committed())}")
    return 0


def run_chaos(args: argparse.Namespace, argv: list[str]) -> int:
    """`chaos`: the run's tables printed and saved beside its figures; exit 1 when its verdict found a problem."""
    from perf.chaos import report
    from perf.chaos.run import Options, run

    figures = run(Options(seconds=args.seconds, seed=args.seed, work=args.work / "chaos"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    text = report.markdown(figures, command_line("perf", argv))
    args.out.with_suffix(".md").write_text(text)
    print(text)
    return 1 if figures["problems"] else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m perf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("sweep", help="run a spec: the kit, its baselines and the limit")
    s.add_argument("--spec", help="a name under perf/specs/ or a path (default: quick; model with --model)")
    s.add_argument("--model", help="measure the model of a spec (models/NAME.toml) instead of a shipped workload")
    s.add_argument("--models", type=Path, default=MODELS, help="the folder of model specs")
    s.add_argument("--out", type=Path, help="results, plots and REPORT.md (default: build/perf/results-<spec>)")
    s.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "perf", help="repositories and logs")
    s.add_argument("--families", nargs="+", help="only these target families")
    s.add_argument("--max-concurrency", type=int, help="leave out the spec's loads above this many clients")
    s.add_argument("--deadline", type=float, help="Unix time by which the run must have written its results")
    s.add_argument("--budget", type=float, help="seconds from now by which it must have (without --deadline)")
    s.add_argument(
        "--override",
        type=json.loads,
        default={},
        help='JSON laid over the spec (each spec of a suite), e.g. \'{"placement": {"device": "cpu", "dtype": "fp32"}}\'',
    )
    commands.add_parser("report", help="regenerate every committed REPORT.md and perf/RESULTS.md from their results.json")
    c = commands.add_parser("chaos", help="faults under load: the served kit, 64 clients and a fault every 20-60 s")
    c.add_argument("--seconds", type=float, default=1200.0, help="how long the clients send (default 20 minutes)")
    c.add_argument("--seed", type=int, default=40, help="chooses the faults, their times and the inputs")
    c.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "reliability" / "chaos.json", help="figures (and .md)")
    c.add_argument("--work", type=Path, default=REPO_ROOT / "build", help="the run's repository, specs and logs go in WORK/chaos")
    args = parser.parse_args(argv)
    if args.command == "report":
        return regenerate()
    if args.command == "chaos":
        return run_chaos(args, argv)
    try:
        return run_sweep(args, argv)
    except FileNotFoundError as exc:  # no spec, or no exported model
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
