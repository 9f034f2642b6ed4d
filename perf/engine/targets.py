"""The servers a sweep measures, each started on free ports and stopped by the tool.

`KitTarget` is the kit's Triton on a repository variant built by kit.control.repository from the
committed sources: the spec's profile (`cpu` unless it names another, e.g. `gpu-embedded`) with
per-model overrides (never a hand-copied or patched config), holding only the models of the
workload under test. A spec's `placement` ({"device": ..., "dtype": ...}) goes to every model the
profile serves on the PyTorch runner: FP16 on the GPU, or the CPU rehearsal's FP32. `DoorTarget` is
the same Triton with the front door in front of it, measured through the door's HTTP route.
`HttpTarget` is one of the workload's hand-rolled baselines in perf/baselines, on the same model
folder. Every target names the process trees whose CPU and memory are its own (`pids`) and how it is
reached: `grpc_url` for Triton's own protocol, `http_url` + `route` for a JSON POST.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import tritonclient.grpc as grpcclient

from kit.control.configs import ARTIFACTS, REPO_ROOT
from kit.control.profiles import Profile, load_profile
from kit.control.repository import build, plan
from kit.control.served import ServedModel
from kit.server.runtime import ServerOptions, TritonServer, answers_ok, free_port
from kit.server.serve import Door
from perf.engine.workload import Baseline, Workload
from perf.sim.device import COUNTERS_ENV, busy_seconds

CORES = os.cpu_count() or 1
# The PyTorch runner's metrics on Triton's port (kit.adapters.runner_metrics): counters and the histogram's sums and
# counts, differenced over each point; the warm-up's gauges, read once a target has started.
RUNNER_COUNTERS = ("kit_runner_stage_seconds_sum", "kit_runner_stage_seconds_count", "kit_runner_runs_", "kit_runner_rows_")
RUNNER_WARM_UP = "kit_runner_warmup"


def merged(base: dict, override: dict) -> dict:
    """A copy of `base` with `override` laid over it, nested dicts merged key by key."""
    out = json.loads(json.dumps(base))
    for key, value in override.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def variant_profile(workload: Workload, setting: dict) -> dict:
    """The workload's deployment profile with its models' entries overridden by `setting` (e.g.
    {"radar_classifier": {"instances": 2}}), and the deployment's placement ({"device": ..., "dtype": ...}) laid over
    every role and model the profile serves on the PyTorch runner: a profile file's contents (kit.control.profiles)."""
    d = workload.deployment
    base = load_profile(d.profile)
    setting = workload.by_role(setting)
    models = {m: merged(base.models.get(m, {}), setting.get(m, {})) for m in sorted(set(base.models) | set(setting))}
    roles = json.loads(json.dumps(base.roles))
    for placement in [*roles.values(), *models.values()]:
        # Paths beside the profile file stay where they are, whichever folder the variant is written to.
        if "model_py" in placement:
            placement["model_py"] = str(base.folder / placement["model_py"])
        placement["files"] = {name: str(base.folder / path) for name, path in placement.get("files", {}).items()}
        if not placement["files"]:
            del placement["files"]
        if placement.get("runner") == "torch":
            placement.update(d.placement)
            if placement.get("device") == "cpu":
                placement.pop("gpus", None)
    return {"description": f"perf variant of {d.profile}", "target": base.target, "roles": roles, "models": models}


def linked_artifacts(workdir: Path, model_dir: Path, name: str) -> Path:
    """An artifacts folder whose `name/` is the model under test (e.g. `radar/`: the RoBERTa-large stand-in), beside
    the project's other exports (a shipped spec's networks, say)."""
    artifacts = workdir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    for folder in ARTIFACTS.iterdir() if ARTIFACTS.is_dir() else []:
        link = artifacts / folder.name
        if folder.name != name and not link.exists():
            link.symlink_to(folder.resolve())
    link = artifacts / name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(model_dir.resolve())
    return artifacts


def variant_models(workload: Workload, setting: dict, model_dir: Path, workdir: Path) -> dict[str, ServedModel]:
    """The models a kit variant serves, planned from its profile file (written into `workdir`): placed configs and
    typed settings, unbuilt."""
    artifacts = linked_artifacts(workdir, model_dir, workload.artifacts)
    path = workdir / "profile.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(variant_profile(workload, setting), indent=1) + "\n")
    return plan(path, workload.specs, artifacts, models=workload.models)


def placements(workload: Workload, setting: dict, models: dict[str, ServedModel]) -> dict[str, dict]:
    """Each model's placement in a kit variant, as its role and its entry give it, and under `served` the parameters
    its typed settings hold once planned: what a variant's label reads."""
    profile = variant_profile(workload, setting)
    placed = Profile(workload.deployment.profile, profile["target"], profile["roles"], profile["models"])
    out = {}
    for name, model in models.items():
        served = model.settings.to_parameters() if model.settings is not None else {}
        out[name] = placed.placement(model.role, name, model.config) | {"served": served}
    return out


def device_counters(workdir: Path) -> dict[str, float]:
    """A simulated accelerator's busy seconds so far, counted by the target's processes (perf.sim.device)."""
    return {"busy_s": busy_seconds(workdir / "sim-counters")}


def difference(after: dict, before: dict) -> dict:
    """Counters over a window: `after - before`, key by key, nested dicts too."""
    return {k: difference(v, before.get(k, {})) if isinstance(v, dict) else v - before.get(k, 0) for k, v in after.items()}


class KitTarget:
    """Triton with the workload's deployment profile, overridden per model by `setting`."""

    family = "kit"
    protocol = "grpc"

    def __init__(self, workload: Workload, setting: dict, model_dir: Path, workdir: Path):
        self.workload, self.setting, self.model_dir, self.workdir = workload, setting, model_dir, workdir
        self.models = variant_models(workload, setting, model_dir, workdir / "plan")
        self.placements = placements(workload, setting, self.models)
        self.label = workload.variant_label(self.placements)
        self.server: TritonServer | None = None

    @property
    def workers(self) -> int:
        return int(self.placements[self.workload.workers].get("instances", 1))

    def start(self, timeout: float = 600) -> None:
        repository = self.workdir / "repository"
        self.models = variant_models(self.workload, self.setting, self.model_dir, self.workdir)
        build(
            self.workdir / "profile.json",
            repository,
            self.workdir / "artifacts",
            specs=self.workload.specs,
            models=self.workload.models,
        )
        options = ServerOptions.on_free_ports(
            repository,
            gpu_metrics=self.workload.deployment.on_gpu,
            environment={COUNTERS_ENV: str(self.workdir / "sim-counters")},
        )
        self.server = TritonServer(options, log_path=self.workdir / "server.log")
        self.server.start(timeout=timeout)

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.server.process.pid,)

    @property
    def grpc_url(self) -> str:
        return self.server.options.grpc_url

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def statistics(self) -> dict[str, dict]:
        """Triton's cumulative per-model counters (ns), to split a run's time into queue and compute."""
        client = grpcclient.InferenceServerClient(self.grpc_url)
        try:
            stats = client.get_inference_statistics(as_json=True)["model_stats"]
        finally:
            client.close()
        out = {}
        for model in stats:
            s = model["inference_stats"]
            out[model["name"]] = {
                "requests": int(s["success"].get("count", 0)),
                "inferences": int(model.get("inference_count", 0)),
                "executions": int(model.get("execution_count", 0)),
                **{k: int(s[k].get("ns", 0)) for k in ("queue", "compute_input", "compute_infer", "compute_output")},
                # Per execution (batch_stats): the request-level figures above count an execution once per request in it.
                "execution_compute_infer": sum(int(b["compute_infer"].get("ns", 0)) for b in model.get("batch_stats", [])),
            }
        return out

    def counters(self) -> dict[str, dict]:
        """Triton's statistics per model, the workload's and the runners' Prometheus counters by `name{labels}`, a
        simulated device's."""
        metrics = self.metrics((*self.workload.metric_prefixes, *RUNNER_COUNTERS))
        return {"triton": self.statistics(), "metrics": metrics, "device": device_counters(self.workdir)}

    def warm_up(self) -> dict[str, float]:
        """What the runners' warm-up did, by `name{labels}` (read once started: they warm before they are ready)."""
        return self.metrics((RUNNER_WARM_UP,))

    def metrics(self, prefixes: tuple[str, ...]) -> dict[str, float]:
        text = urllib.request.urlopen(self.server.options.metrics_url, timeout=5).read().decode()
        names = "|".join(re.escape(p) for p in prefixes)
        return {
            f"{n}{{{labels}}}": float(v) for n, labels, v in re.findall(rf"^((?:{names})\w*)\{{([^}}]*)\}} (\S+)$", text, re.M)
        }

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


class DoorTarget(KitTarget):
    """The kit through its front door (`python -m door`, as `make serve` starts it): JSON over HTTP to the
    workload's door route, Triton behind it on the same variant as the kit target's."""

    family = "door"
    protocol = "http"

    def __init__(self, workload: Workload, setting: dict, model_dir: Path, workdir: Path):
        """`setting` as the kit's, and "door": {"workers": N} for the door's own processes, with any other of the
        door's settings by name ("coalesce_in_flight": 0)."""
        super().__init__(workload, setting, model_dir, workdir)
        door = dict(setting.get("door", {}))
        self.door_workers = int(door.pop("workers", 1))
        self.door_settings = {f"DOOR_{name.upper()}": str(value) for name, value in door.items()}
        self.label += f" door-workers={self.door_workers}" + "".join(f" door-{k}={v}" for k, v in door.items())

    def start(self, timeout: float = 600) -> None:
        super().start(timeout)
        log = self.workdir / "door.log"
        self.door = Door(
            self.grpc_url, "127.0.0.1", free_port(), None, log_path=log, workers=self.door_workers, settings=self.door_settings
        )
        try:
            self.door.start()
        except Exception:
            super().stop()
            raise

    @property
    def pids(self) -> tuple[int, ...]:
        return (*super().pids, self.door.process.pid)

    @property
    def http_url(self) -> str:
        return self.door.url

    @property
    def route(self) -> str:
        return self.workload.door_route

    def stop(self) -> None:
        if getattr(self, "door", None) is not None:
            self.door.stop()
        super().stop()


def baseline_command(baseline: Baseline, setting: dict, port: int) -> list[str]:
    """The baseline's server as its field report started it, on `port`."""
    py = sys.executable
    if baseline.server == "flask":
        return [py, "-m", baseline.app.split(":")[0], "--port", str(port)]
    if baseline.server == "gunicorn":
        workers = f"-w {setting['workers']} --threads {setting['threads']} -b 127.0.0.1:{port} --timeout 600"
        return [py, "-m", "gunicorn", "-k", "gthread", *workers.split(), baseline.app]
    workers = f"--host 127.0.0.1 --port {port} --workers {setting.get('workers', 1)} --log-level warning"
    return [py, "-m", "uvicorn", baseline.app, *workers.split()]


class HttpTarget:
    """A baseline; each worker process loads its own model (ORT threads: cores / workers)."""

    protocol = "http"

    def __init__(self, workload: Workload, family: str, setting: dict, model_dir: Path, workdir: Path):
        self.workload, self.family, self.setting, self.model_dir, self.workdir = workload, family, setting, model_dir, workdir
        self.label = " ".join(f"{k}={v}" for k, v in setting.items()) or "default"
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def workers(self) -> int:
        return int(self.setting.get("workers", 1))

    def environment(self) -> dict[str, str]:
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env["ORT_THREADS"] = str(self.setting.get("ort_threads", max(1, CORES // self.workers)))
        env[COUNTERS_ENV] = str(self.workdir / "sim-counters")
        env.update(self.workload.baseline_environment(self.family, self.setting, self.model_dir, self.workdir))
        return env

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def start(self, timeout: float = 600) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            baseline_command(self.workload.baselines[self.family], self.setting, self.port),
            cwd=REPO_ROOT,
            env=self.environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.family} exited with code {self.process.returncode}; see {self.log_path}")
            if self.log_path.read_text(errors="replace").count("model ready in pid") >= self.workers and self.healthy():
                return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{self.family} was not ready within {timeout:.0f} s; see {self.log_path}")

    def healthy(self) -> bool:
        return answers_ok(f"{self.http_url}/health")

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.process.pid,)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def route(self) -> str:
        return self.workload.endpoint

    def counters(self) -> dict[str, dict]:
        """A baseline keeps none but a simulated device's."""
        return {"triton": {}, "metrics": {}, "device": device_counters(self.workdir)}

    def stop(self, timeout: float = 30) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class ControlTarget(KitTarget):
    """A kit variant measured as the control of an experiment (the kit without its runner's ladder, warm-up and CUDA
    graphs, say): its own family, so that the kit's targets are judged on the kit's own settings alone."""

    family = "control"


FAMILIES = {"kit": KitTarget, "door": DoorTarget, "control": ControlTarget}


def make_target(workload: Workload, family: str, setting: dict, model_dir: Path, work: Path) -> KitTarget | HttpTarget:
    """A target of `family` ("kit", "door" or one of the workload's baselines), in its own folder under `work`."""
    if family in FAMILIES:
        target = FAMILIES[family](workload, setting, model_dir, work)
    elif family in workload.baselines:
        target = HttpTarget(workload, family, setting, model_dir, work)
    else:
        known = ", ".join([*FAMILIES, *workload.baselines])
        raise ValueError(f"no {family!r} target for {workload.name} (known: {known})")
    target.workdir = work / f"{family}-{target.label}".replace(" ", "_").replace("/", "_")
    return target
