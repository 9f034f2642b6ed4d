"""The whole GPU measurement of issue 13 in one process, within a deadline (docs/GPU.md):

    python -m perf.gpu --out DIR                                  # on the GPU host (perf/gpu/run.sh runs this)
    python -m perf.gpu --device cpu --quick --out DIR             # the dry run: tiny models in FP32 on the CPU

Phases, each skipped (and recorded) when the deadline no longer leaves it room: prepare (models, cost model,
limit and FP32 references, in a child process), RADAR on the kit at 1-256 clients with a sweep of `radar`
instances, RADAR's baselines (Flask per request; the asyncio batcher, probed then swept), ResNet-50's batching
variants. After every phase results.json, the plots and REPORT.md are rewritten in --out, so that a run cut
short still returns what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime

from kit.control.configs import REPO_ROOT
from kit.control.runtime import triton_dist
from perf.engine.sweep import source_commit
from perf.gpu import nvml, phases
from perf.gpu.plan import DEFAULT_BUDGET_S, FULL, QUICK, Budget, phase_estimates, plan_lines
from perf.gpu.report import write_report
from perf.gpu.targets import Placement
from perf.gpu.verdicts import radar_verdicts, resnet_verdicts

OCR_FINDING = {
    True: "the CUDA provider is there: the OCR networks could run on the GPU (not measured here)",
    False: "onnxruntime-gpu is not installed (no CUDAExecutionProvider), so the PP-OCR graphs cannot run on the GPU "
    "through ONNX Runtime here; the gpu-embedded profile keeps them on CPU ONNX Runtime",
}


def stub_numpy() -> str:
    """The numpy the Python-backend stubs import: run.sh's KIT_STUB_SITE (numpy 1.x) when set, else this process's."""
    site = Path(os.environ.get("KIT_STUB_SITE", "/nonexistent"))
    carried = sorted(site.glob("numpy-*.dist-info"))
    return carried[0].name.removeprefix("numpy-").removesuffix(".dist-info") if carried else np.__version__


def environment() -> dict:
    providers = onnxruntime.get_available_providers()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cores": os.cpu_count(),
        "numpy": np.__version__,
        "stub_numpy": stub_numpy(),
        "triton_dist": str(triton_dist()),
        "gpu": nvml.describe(),
        "ocr": {
            "onnxruntime": onnxruntime.__version__,
            "providers": providers,
            "finding": OCR_FINDING["CUDAExecutionProvider" in providers],
        },
    }


def new_results(args: argparse.Namespace, argv: list[str]) -> dict:
    mode = QUICK if args.quick else FULL
    return {
        "command": " ".join(["python -m perf.gpu", *map(shlex.quote, argv)]),
        "started": time.strftime("%Y-%m-%d %H:%M %Z"),
        "commit": source_commit(),
        "mode": mode.name,
        "placement": vars(Placement.for_device(args.device)),
        "texts": mode.texts,
        "environment": environment(),
        "plan": phase_estimates(mode),
        "phase_seconds": {},
        "skipped": [],
        "errors": [],
        "radar": {"kit": [], "flask": [], "batcher": [], "batcher_probes": []},
        "resnet": {"rows": []},
    }


def verdicts(results: dict) -> list:
    radar = results["radar"]
    limit = results.get("prepare", {}).get("radar", {}).get("limit", {}).get("best", {}).get("chunks_per_s")
    return radar_verdicts(radar["kit"], radar["flask"], radar["batcher"], limit) + resnet_verdicts(results["resnet"]["rows"])


def save(results: dict, out: Path, started: float) -> Path:
    results["minutes"] = round((time.time() - started) / 60, 1)
    judged = verdicts(results)
    results["verdicts"] = [vars(v) for v in judged]
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    return write_report(results, judged, out)


PHASES = (
    ("prepare", phases.prepare),
    ("radar kit", phases.radar_kit),
    ("radar baselines", phases.radar_baselines),
    ("resnet", phases.resnet),
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m perf.gpu", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="results.json, plots and REPORT.md (at most 8 files)")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "gpu-work", help="models, repositories, server logs")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny models and short windows (the CPU dry run)")
    parser.add_argument("--deadline", type=float, help="Unix time by which the run must have written its results")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds from now, without --deadline")
    args = parser.parse_args(argv)
    started = time.time()
    mode = QUICK if args.quick else FULL
    budget = Budget(args.deadline or started + args.budget)
    args.out.mkdir(parents=True, exist_ok=True)
    run = phases.Run(mode, Placement.for_device(args.device), budget, args.work, new_results(args, argv))
    run.checkpoint = lambda: save(run.results, args.out, started)
    print("\n".join(plan_lines(mode, budget)), flush=True)
    for name, phase in PHASES:
        if name != "prepare" and "prepare" not in run.results:
            run.skip(name, "no models: the prepare phase did not finish")
            continue
        if not budget.allows(mode.start_s + mode.point_s(mode.window_s)):
            run.skip(name, f"{budget.left():.0f} s left")
            continue
        print(f"== {name} ({budget.left():.0f} s left)", flush=True)
        begin = time.time()
        try:
            phase(run)
        except Exception as exc:
            run.error(name, exc)
        run.results["phase_seconds"][name] = round(time.time() - begin, 1)
        save(run.results, args.out, started)
    report = save(run.results, args.out, started)
    print(f"report: {report} ({run.results['minutes']} min)", flush=True)
    return exit_status(run.results)


def exit_status(results: dict) -> int:
    """0 only when every phase ran whole: an error or a skipped step fails the run (and the CPU rehearsal)."""
    for problem in results["errors"]:
        print(f"failed: {problem['what']}: {problem['error']}", file=sys.stderr)
    for step in results["skipped"]:
        print(f"skipped: {step['what']} ({step['why']})", file=sys.stderr)
    return 1 if results["errors"] or results["skipped"] else 0


if __name__ == "__main__":
    sys.exit(main())
