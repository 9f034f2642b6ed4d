"""Sweep the kit and the hand-rolled baselines on the same model, then write the report.

    python -m perf.sweep --spec quick --out build/perf/results-quick                 # make perf-quick
    python -m perf.sweep --spec full --out perf/results --report perf/RESULTS.md     # make perf
    python -m perf.sweep --spec ocr --out perf/results/ocr --report perf/RESULTS.md  # make perf-ocr

A spec's `workload` (default "radar"; "ocr") picks the inputs, the kit's models and the baselines.

For each target family in the spec: every setting is started and probed at one load (throughput,
p99, peak RSS, CPU of server and client); the best setting (highest throughput) is then measured
at every load of the sweep, on every input set. The in-process limit is measured in the same run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from kit.repository import REPO_ROOT
from perf import limit, perf_analyzer
from perf.inputs import ocr_inputs, radar_inputs
from perf.procstats import TreeMonitor, cpu_seconds
from perf.spec import load_spec, probe_load, sweep_loads
from perf.targets import make_target, radar_bucket_count


STALL_S = 30.0


def idle_detector(pid: int, seconds: float = STALL_S):
    """True once the server tree has used no CPU for `seconds` (no request of the run is being served)."""
    last = [cpu_seconds(pid), time.monotonic()]

    def stalled() -> bool:
        now = cpu_seconds(pid)
        if now - last[0] > 0.05:
            last[:] = [now, time.monotonic()]
        return time.monotonic() - last[1] > seconds

    return stalled


def measure(target, inputs, load, out_dir: Path, name: str) -> dict:
    """One perf_analyzer point with the server tree's CPU and peak memory, and Triton's own split of time.
    A run that stalls (see perf_analyzer.run) is run once more."""
    for _ in range(2):
        before = target.statistics()
        with TreeMonitor(target.pid) as monitor:
            m = perf_analyzer.run(target.load_args(inputs), load, out_dir, name, stalled=idle_detector(target.pid))
        after = target.statistics()
        if not (m.error or "").startswith("stalled"):
            break
        print(f"  {target.family} {load.label}: perf_analyzer {m.error}; running the point again", flush=True)
    row = {"family": target.family, "setting": target.label, "workers": target.workers, "input": inputs.name,
           "load": load.label, **m.row(), "server_cpu_s": round(monitor.cpu_s, 2),
           "peak_rss_mb": round(monitor.peak_rss / 2**20), f"{inputs.unit}_per_request": inputs.per_request,
           f"{inputs.unit}_per_s": m.throughput * inputs.per_request}
    if after:
        row["triton"] = {model: {k: after[model][k] - before.get(model, {}).get(k, 0) for k in after[model]} for model in after}
    status = m.error or f"{m.throughput:.2f} req/s p99 {m.p99_ms:.0f} ms"
    print(f"  {target.family:<9} {target.label:<44} {inputs.name:<6} {load.label:<9} {status}", flush=True)
    return row


def warm_up(target, inputs, requests: int, out_dir: Path, name: str) -> None:
    """First executions (session arenas, each bucket's shapes) are slow: keep them out of the numbers.
    A failure here shows again in the measurement that follows, so it is not checked."""
    perf_analyzer.run(target.load_args(inputs), perf_analyzer.Load(requests, concurrency=min(requests, 8)), out_dir, name)


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(memory / 2**20, 1), "os": platform.platform(),
            "python": platform.python_version(), "load_average_at_start": os.getloadavg()}


def run_family(family: str, settings: list[dict], spec: dict, inputs: dict, model_dir: Path, work: Path) -> tuple[list, list]:
    """Probe every setting, then sweep the best; returns (probe rows, sweep rows)."""
    probes, rows, best, running = [], [], None, None
    probe_inputs = inputs[spec["probe"]["input"]]
    try:
        for index, setting in enumerate(settings):
            target = make_target(family, setting, model_dir, work, spec.get("workload", "radar"))
            try:
                target.start()
                warm_up(target, probe_inputs, spec["probe"].get("warmup", 8), work / "pa", f"{family}-warmup{index}")
                row = measure(target, probe_inputs, probe_load(spec), work / "pa", f"{family}-probe{index}")
            except BaseException:
                target.stop()
                raise
            probes.append(row)
            if best is None or (not row["error"] and (best["error"] or row["throughput"] > best["throughput"])):
                if running is not None:
                    running.stop()
                best, running = row, target
            else:
                target.stop()
        for name, input_set in inputs.items():
            loads = sweep_loads(spec) if name == spec["sweep"]["input"] else sweep_loads({**spec, "sweep": spec["extra"][name]})
            for i, load in enumerate(loads):
                rows.append(measure(running, input_set, load, work / "pa", f"{family}-{name}-{i}"))
    finally:
        if running is not None:
            running.stop()
    return probes, rows


def radar_setup(spec: dict, model_dir: Path, inputs_dir: Path) -> tuple[dict, dict]:
    """The input sets and the limit, in chunks/s; each set learns its chunks per text."""
    inputs = {s["name"]: radar_inputs(inputs_dir, s["name"], s["count"], s["min_chars"], s["max_chars"], s["seed"]) for s in spec["inputs"]}
    print(f"limit: offline ONNX Runtime on {model_dir.name}", flush=True)
    lim_spec = spec["limit"]
    lim = limit.measure(model_dir, inputs[lim_spec["input"]].items, lim_spec.get("chunks"), lim_spec["batch_sizes"], radar_bucket_count())
    for input_set in inputs.values():
        input_set.per_request = limit.chunks_per_text(model_dir, input_set.items)
    print(f"  best: {lim['best']['layout']} batch {lim['best']['batch']}: {lim['best']['chunks_per_s']:.2f} chunks/s", flush=True)
    return inputs, lim


def ocr_setup(spec: dict, model_dir: Path, inputs_dir: Path) -> tuple[dict, dict]:
    """The image sets and the limit, in images/s: the kit's pipeline in-process on the limit set's images."""
    inputs = {s["name"]: ocr_inputs(inputs_dir, s["name"], s["count"], s["seed"]) for s in spec["inputs"]}
    print(f"limit: the OCR pipeline in-process on {model_dir.name}", flush=True)
    lim_spec = spec["limit"]
    lim = limit.measure_ocr(model_dir, inputs[lim_spec["input"]].items[: lim_spec.get("images")], lim_spec.get("warmup", 2))
    print(f"  best: {lim['best']['layout']}: {lim['best']['images_per_s']:.2f} images/s", flush=True)
    return inputs, lim


WORKLOADS = {"radar": (radar_setup, ("model.onnx",)), "ocr": (ocr_setup, ("det/model.onnx", "cls/model.onnx", "rec/model.onnx"))}


def write_csv(rows: list[dict], path: Path) -> None:
    flat = [{k: v for k, v in r.items() if not isinstance(v, dict)} for r in rows]
    if not flat:
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="quick", help="a name under perf/specs/ or a path")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "perf" / "results" / "quick")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "perf", help="repositories, logs, raw CSVs")
    parser.add_argument("--report", type=Path, help="also write the Markdown report here (e.g. perf/RESULTS.md)")
    parser.add_argument("--families", nargs="+", help="only these target families")
    parser.add_argument("--max-concurrency", type=int, help="leave out the spec's loads above this many clients")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    spec["path"] = os.path.relpath(spec["path"], REPO_ROOT)
    if args.max_concurrency:
        for sweep in [spec["sweep"], *spec["extra"].values()]:
            sweep["concurrency"] = [c for c in sweep.get("concurrency", []) if c <= args.max_concurrency]
    model_dir = (REPO_ROOT / spec["model"]).resolve()
    setup, needs = WORKLOADS[spec.get("workload", "radar")]
    if not all((model_dir / f).is_file() for f in needs):
        print(f"error: no exported model in {model_dir} (see the spec's `model`)", file=sys.stderr)
        return 2
    work = args.work / Path(spec["path"]).stem
    args.out.mkdir(parents=True, exist_ok=True)
    started, host = time.time(), machine()  # the load average before the run, not after it
    inputs, lim = setup(spec, model_dir, work / "inputs")
    probes, sweeps = [], []
    for family, settings in spec["targets"].items():
        if args.families and family not in args.families:
            continue
        print(f"{family}: {len(settings)} setting(s)", flush=True)
        p, s = run_family(family, settings, spec, inputs, model_dir, work)
        probes += p
        sweeps += s
    results = {
        "workload": spec.get("workload", "radar"), "spec": spec, "machine": host, "model": spec["model"],
        "command": " ".join(shlex.quote(a) for a in ["python", "-m", "perf.sweep", *(argv if argv is not None else sys.argv[1:])]),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip(),
        "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)), "minutes": round((time.time() - started) / 60, 1),
        "load_average_at_end": os.getloadavg(), "limit": lim, "probes": probes, "sweeps": sweeps,
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    write_csv(sweeps, args.out / "sweeps.csv")
    write_csv(probes, args.out / "probes.csv")
    from perf.report import write_report

    write_report(results, args.out, args.report or args.out / "REPORT.md")
    print(f"results in {args.out} ({results['minutes']} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
