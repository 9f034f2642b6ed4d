"""Sweep the kit, its front door and a workload's hand-rolled baselines on the same model; write results.json and CSVs.

Three ways to run the targets of a spec, one results schema:

- with a `probe`: each family's settings are started one after another, warmed up and probed at one load
  (throughput, p99, peak RSS, CPU of server and client); the best (highest throughput) is then measured at
  every load of the sweep, on every input set;
- without one: every setting is measured at every load, each on a fresh server;
- with `rounds`: every target of every family is started at once and kept running, and the
  loads go round after round in rotating order, the limit first in each round, so that slow drift of shared
  cores falls on every target alike; rows carry their round, and the report takes medians.

The workload's limit is measured in the same run. With a deadline (perf.engine.budget) every start, limit and point is first
asked whether it still fits; what does not is recorded as skipped. A target that fails to start or to
answer is recorded with its log's tail, and the run goes on. results.json is rewritten after every point.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import shlex
import statistics
import subprocess
import time
import traceback
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import onnxruntime

from kit.control.configs import REPO_ROOT
from kit.server.runtime import install_python_stub, triton_dist
from perf.engine import gpu
from perf.engine.budget import Budget
from perf.engine.inputs import InputSet
from perf.engine.load import Window
from perf.engine.point import measure
from perf.engine.revision import tree_commit
from perf.engine.spec import probe_load, sweep_loads
from perf.engine.targets import FAMILIES, KitTarget, make_target
from perf.engine.workload import Workload

# The GPU host's copy of the tree names its commit here (run.sh reads it from the carry's manifest): that copy may
# hold no .git, or a stale one from an earlier copy, which would name another commit.
COMMIT_ENV = "KIT_COMMIT"
LOG_TAIL_LINES = 30
# Where the PyTorch runner's stubs write the torch.profiler traces a kit variant's `profile_executions` asks for
# (kit.adapters.torch_runner_model); run.sh sets it inside the results folder.
TRACE_DIR_ENV = "KIT_TRACE_DIR"


def traces() -> dict[str, int]:
    """The traces written so far: file name -> bytes."""
    return {p.name: p.stat().st_size for p in sorted(Path(os.environ[TRACE_DIR_ENV]).glob("*.trace.json.gz"))}


def source_commit(root: Path = REPO_ROOT) -> str:
    """The commit of the code that ran: $KIT_COMMIT where set (the GPU host's copy), else the working tree's where it
    has git (perf.engine.revision), else "unknown"."""
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV]
    if (root / ".git").exists():
        try:
            return tree_commit(root)
        except (OSError, subprocess.SubprocessError):  # no git on this host
            pass
    return "unknown"


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
        "gpu": gpu.describe(),
        "onnxruntime_providers": onnxruntime.get_available_providers(),
        "load_average_at_start": os.getloadavg(),
    }


class Run:
    """One sweep in progress: what it measures, where, within which budget; its results, saved as they grow."""

    def __init__(
        self, w: Workload, spec: dict, model_dir: Path, work: Path, budget: Budget, results: dict, save: Callable[[], None]
    ):
        self.w, self.spec, self.model_dir, self.work = w, spec, model_dir, work
        self.budget, self.results, self.save = budget, results, save

    def skip(self, what: str, why: str) -> None:
        print(f"skipped: {what} ({why})", flush=True)
        self.results["skipped"].append({"what": what, "why": why})

    def error(self, what: str, exc: BaseException, log: Path | None = None) -> None:
        print(f"error: {what}: {exc!r}", flush=True)
        entry = {"what": what, "error": repr(exc), "trace": traceback.format_exc().splitlines()[-8:]}
        if log is not None and log.is_file():
            entry["log_tail"] = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        self.results["errors"].append(entry)
        self.save()

    def fits(self, what: str, seconds: float) -> bool:
        if self.budget.allows(seconds):
            return True
        self.skip(what, f"{self.budget.left():.0f} s left before the deadline, {seconds:.0f} s needed")
        return False

    def start(self, targets: list) -> list:
        """Start the targets together (their start-ups overlap); the ones that fail are recorded and left out."""
        if not self.fits(f"starting {len(targets)} target(s)", self.budget["start_s"]):
            return []
        if any(t.family in ("kit", "door") for t in targets):
            install_python_stub(triton_dist())  # once, before servers that would each copy it
        timeout = min(600.0, max(30.0, self.budget.left()))

        def start(target):
            try:
                target.start(timeout=timeout)
                return target
            except Exception as exc:
                target.stop()
                self.error(f"starting {target.family} {target.label}", exc, target.log_path)
                return None

        with ThreadPoolExecutor(max(1, len(targets))) as pool:
            started = [t for t in pool.map(start, targets) if t is not None]
        for target in started:
            if isinstance(target, KitTarget) and (warm := target.warm_up()):
                self.results["warm_ups"][f"{target.family} {target.label}"] = warm
        return started

    def point(self, target, inputs: InputSet, load: Window, into: str = "sweeps", **tags) -> dict | None:
        """One measured point (the GPU sampled over it where the spec asks), added to the results and saved."""
        what = f"{target.family} {target.label} {inputs.name} {load.label}"
        if not self.fits(what, self.budget.point_s(load)):
            return None
        try:
            row = measure(target, inputs, load, sample_gpu=self.spec.get("gpu", False))
        except Exception as exc:
            self.error(what, exc, target.log_path)
            return None
        row.update(tags)
        self.results[into].append(row)
        self.save()
        return row

    def limit(self, run_spec: dict, inputs: dict, work: Path) -> dict | None:
        if "limit" not in run_spec or not self.fits("the limit", self.budget["limit_s"]):
            return None
        try:
            return self.w.limit(run_spec, self.model_dir, work, inputs)
        except Exception as exc:
            self.error("the limit", exc)
            return None

    def accuracy(self, target, inputs: dict) -> None:
        """The workload's served results against its direct reference, once per run, on the first kit target."""
        if "accuracy" not in self.spec or "accuracy" in self.results or target.family != "kit":
            return
        if not self.fits("the accuracy check", self.budget["accuracy_s"]):
            return
        try:
            self.results["accuracy"] = self.w.accuracy(target, self.spec, self.model_dir, inputs)
        except Exception as exc:
            self.error("the accuracy check", exc, target.log_path)
        self.save()


def sweep_target(run: Run, target, spec: dict, inputs: dict[str, InputSet], **tags) -> None:
    """Every input set at its loads, on a started target."""
    for name, input_set in inputs.items():
        for load in sweep_loads(spec, name):
            run.point(target, input_set, load, **tags)


def probe_family(run: Run, family: str, settings: list[dict], spec: dict, inputs: dict, work: Path, **tags) -> None:
    """Probe every setting, then sweep the best."""
    best, running = None, None
    probe_inputs = inputs[spec["probe"]["input"]]
    try:
        for setting in settings:
            target = make_target(run.w, family, setting, run.model_dir, work)
            if not run.start([target]):
                continue
            run.accuracy(target, inputs)
            row = run.point(target, probe_inputs, probe_load(spec), into="probes", **tags)
            if row is not None and (
                best is None or (not row["error"] and (best["error"] or row["throughput"] > best["throughput"]))
            ):
                if running is not None:
                    running.stop()
                best, running = row, target
            else:
                target.stop()
        if running is not None:
            sweep_target(run, running, spec, inputs, **tags)
    finally:
        if running is not None:
            running.stop()


def sweep_family(run: Run, family: str, settings: list[dict], spec: dict, inputs: dict, work: Path, **tags) -> None:
    """Every setting at every load, each on a fresh server."""
    for setting in settings:
        target = make_target(run.w, family, setting, run.model_dir, work)
        if not run.start([target]):
            continue
        try:
            run.accuracy(target, inputs)
            sweep_target(run, target, spec, inputs, **tags)
        finally:
            target.stop()


def chosen(spec: dict, families: list[str] | None) -> dict[str, list[dict]]:
    """The spec's target families, or those of `families` only."""
    return {f: settings for f, settings in spec["targets"].items() if not families or f in families}


def rotated(items: list, by: int) -> list:
    shift = by % len(items) if items else 0
    return items[shift:] + items[:shift]


def check_distinct(targets: list) -> None:
    """Targets that run at once each need their own label: it names their work folder and their rows."""
    seen = Counter((target.family, target.label) for target in targets)
    twins = [f"{family} {label!r}" for (family, label), count in seen.items() if count > 1]
    if twins:
        raise ValueError(f"settings that run as the same layout: {'; '.join(twins)}; make each setting change what it serves")


def in_turns(run: Run, inputs: dict, families: list[str] | None) -> dict | None:
    """Every target started at once and kept; each round: the limit, then every target at every load, in an order
    that rotates from round to round. The limit of the median round, if the workload has one."""
    spec = run.spec
    targets = [
        make_target(run.w, family, setting, run.model_dir, run.work)
        for family, settings in chosen(spec, families).items()
        for setting in settings
    ]
    check_distinct(targets)
    started = run.start(targets)
    measured = []
    try:
        for target in started:
            run.accuracy(target, inputs)
        for r in range(spec["rounds"]):
            print(f"round {r + 1}", flush=True)
            lim = run.limit(spec, inputs, run.work)
            if lim is not None:
                measured.append(lim)
                run.results["limit_rounds"].append({"round": r, "best": lim["best"], "layouts": lim["layouts"]})
            for target in rotated([t for t in targets if t in started], r):
                sweep_target(run, target, spec, inputs, round=r)
    finally:
        with ThreadPoolExecutor(max(1, len(started))) as pool:
            list(pool.map(lambda t: t.stop(), started))
    return median_limit(measured, run.w.key) if measured else None


def median_limit(measured: list[dict], key: str) -> dict:
    """Of a limit measured once per round, the round whose best is the median (a measured limit, not a blend)."""
    middle = statistics.median_low([m["best"][key] for m in measured])
    return next(m for m in measured if m["best"][key] == middle)


def run(
    w: Workload,
    spec: dict,
    work: Path,
    families: list[str] | None,
    argv: list[str],
    budget: Budget | None = None,
    out: Path | None = None,
) -> dict:
    """The whole run of a spec; the results, as results.json holds them (rewritten into `out` after every point)."""
    w = w.for_spec(spec)
    known = {*FAMILIES, *w.baselines}
    unknown = set(spec["targets"]) - known
    if unknown:
        raise ValueError(f"{spec['path']}: no {sorted(unknown)} target for {w.name} (known: {', '.join(sorted(known))})")
    model_dir = (REPO_ROOT / spec["model"]).resolve()
    missing = [f for f in w.needs if not (model_dir / f).exists()]
    if missing:
        raise FileNotFoundError(f"no exported model in {model_dir} (missing {', '.join(missing)}; see the spec's `model`)")
    budget = budget or Budget(None, spec.get("budget"))
    started, host = time.time(), machine()  # the load average before the run, not after it
    limits: dict[str, dict] = {}
    results = {
        "workload": w.name,
        "spec": spec,
        "machine": host,
        "model": spec["model"],
        "command": shlex.join(["python", "-m", "perf", *argv]),
        "commit": source_commit(),
        "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)),
        "probes": [],
        "sweeps": [],
        **({"limit_rounds": []} if "rounds" in spec else {}),
        "skipped": [],
        "errors": [],
        "kit_profiles": {
            t.label: t.placements
            for family in ("kit", "control")
            for t in (make_target(w, family, s, model_dir, work / "profiles") for s in spec["targets"].get(family, []))
        },
        "warm_ups": {},
    }

    def finish() -> dict:
        done = dict(results)
        done["minutes"] = round((time.time() - started) / 60, 1)
        done["load_average_at_end"] = os.getloadavg()
        done["limit"] = limits.get("limit")
        return done | ({"traces": traces()} if os.environ.get(TRACE_DIR_ENV) else {})

    def save() -> None:
        if out is not None:
            write_results(finish(), out)

    r = Run(w, spec, model_dir, work, budget, results, save)
    inputs = w.setup(spec, model_dir, work)
    if "rounds" in spec:
        limits["limit"] = in_turns(r, inputs, families)
    else:
        limits["limit"] = r.limit(spec, inputs, work)
        for family, settings in chosen(spec, families).items():
            print(f"{family}: {len(settings)} setting(s)", flush=True)
            each = probe_family if "probe" in spec else sweep_family
            each(r, family, settings, spec, inputs, work)
    save()
    return finish()


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
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    write_csv(results["sweeps"], out / "sweeps.csv")
    write_csv(results["probes"], out / "probes.csv")
