"""Sweep the kit and a workload's hand-rolled baselines on the same model; write results.json and CSVs.

For each target family in the spec: with a `probe`, every setting is started, warmed up and probed
at one load (throughput, p99, peak RSS, CPU of server and client) and the best setting (highest
throughput) is then measured at every load of the sweep, on every input set; without one, every
setting is measured at every load. The workload's limit is measured in the same run. A spec with
`graphs` repeats all of it on each graph (perf.engine.spec.graph_runs).
"""

from __future__ import annotations

import csv
import json
import os
import platform
import shlex
import subprocess
import time
from pathlib import Path

from kit.control.configs import REPO_ROOT
from perf.engine.inputs import InputSet
from perf.engine.perf_analyzer import warm_up
from perf.engine.point import measure
from perf.engine.spec import graph_runs, probe_load, sweep_loads
from perf.engine.targets import make_target, variant_profile
from perf.engine.workload import Workload


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    memory = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory / 2**20, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg(),
    }


# A tree sent without .git (the GPU host's copy) names its commit here: run.sh reads it from the carry's manifest.
COMMIT_ENV = "KIT_COMMIT"


def source_commit(root: Path = REPO_ROOT) -> str:
    """The commit of the code that ran: git's where the tree has one, else $KIT_COMMIT, else "unknown"."""
    if (root / ".git").exists():
        try:
            out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):  # no git on this host
            pass
    return os.environ.get(COMMIT_ENV) or "unknown"


def sweep_target(target, spec: dict, inputs: dict[str, InputSet], work: Path) -> list[dict]:
    """Every input set at its loads, on a started target."""
    return [
        measure(target, input_set, load, work / "pa", f"{target.family}-{name}-{i}")
        for name, input_set in inputs.items()
        for i, load in enumerate(sweep_loads(spec, name))
    ]


def probe_family(
    w: Workload, family: str, settings: list[dict], spec: dict, inputs: dict, model_dir: Path, work: Path
) -> tuple[list, list]:
    """Probe every setting, then sweep the best; returns (probe rows, sweep rows)."""
    probes, best, running = [], None, None
    probe_inputs = inputs[spec["probe"]["input"]]
    try:
        for index, setting in enumerate(settings):
            target = make_target(w, family, setting, model_dir, work)
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
        return probes, sweep_target(running, spec, inputs, work)
    finally:
        if running is not None:
            running.stop()


def sweep_family(w: Workload, family: str, settings: list[dict], spec: dict, inputs: dict, model_dir: Path, work: Path) -> list:
    """Every setting at every load, each on a fresh server."""
    rows = []
    for setting in settings:
        target = make_target(w, family, setting, model_dir, work)
        target.start()
        try:
            rows += sweep_target(target, spec, inputs, work)
        finally:
            target.stop()
    return rows


def run_families(
    w: Workload, spec: dict, inputs: dict, model_dir: Path, work: Path, families: list[str] | None
) -> tuple[list, list]:
    """Every target family of the spec (or of `families`): (probe rows, sweep rows)."""
    probes, sweeps = [], []
    for family, settings in spec["targets"].items():
        if families and family not in families:
            continue
        print(f"{family}: {len(settings)} setting(s)", flush=True)
        if "probe" in spec:
            p, s = probe_family(w, family, settings, spec, inputs, model_dir, work)
            probes += p
        else:
            s = sweep_family(w, family, settings, spec, inputs, model_dir, work)
        sweeps += s
    return probes, sweeps


def run(w: Workload, spec: dict, work: Path, families: list[str] | None, argv: list[str]) -> dict:
    """The whole run of a spec; the results, as results.json holds them. A run over `graphs` holds each
    graph's limit in `limits` and tags every row with its graph's name; otherwise the one limit is `limit`."""
    unknown = set(spec["targets"]) - {"kit", *w.baselines}
    if unknown:
        raise ValueError(f"{spec['path']}: no {sorted(unknown)} target for {w.name} (known: kit, {', '.join(w.baselines)})")
    runs = graph_runs(spec, w.graph_model)
    model_dir = (REPO_ROOT / spec["model"]).resolve()
    missing = [f for f in (*w.needs, *spec.get("graphs", {}).values()) if not (model_dir / f).is_file()]
    if missing:
        raise FileNotFoundError(f"no exported model in {model_dir} (missing {', '.join(missing)}; see the spec's `model`)")
    started, host = time.time(), machine()  # the load average before the run, not after it
    limits, probes, sweeps = {}, [], []
    for graph, run_spec in runs:
        if graph:
            print(f"graph {graph}: {spec['graphs'][graph]}", flush=True)
        run_work = work / graph if graph else work
        inputs, limits[graph] = w.setup(run_spec, model_dir, run_work)
        p, s = run_families(w, run_spec, inputs, model_dir, run_work, families)
        if graph:
            for row in p + s:
                row["graph"] = graph
        probes += p
        sweeps += s
    return {
        "workload": w.name,
        "spec": spec,
        "machine": host,
        "model": spec["model"],
        "command": " ".join(shlex.quote(a) for a in ["python", "-m", "perf", *argv]),
        "commit": source_commit(),
        "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)),
        "minutes": round((time.time() - started) / 60, 1),
        "load_average_at_end": os.getloadavg(),
        **({"limits": limits} if "graphs" in spec else {"limit": limits[None]}),
        "probes": probes,
        "sweeps": sweeps,
        "kit_profiles": {
            w.label(p["models"]): p["models"]
            for _, run_spec in runs
            for p in (variant_profile(w, s) for s in run_spec["targets"].get("kit", []))
        },
    }


def write_csv(rows: list[dict], path: Path) -> None:
    flat = [{k: v for k, v in r.items() if not isinstance(v, dict)} for r in rows]
    if not flat:
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in flat for k in r)))
        writer.writeheader()
        writer.writerows(flat)


def write_results(results: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    write_csv(results["sweeps"], out / "sweeps.csv")
    write_csv(results["probes"], out / "probes.csv")
