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
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import tritonclient.grpc as grpcclient
from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import REPO_ROOT, SOURCE
from kit.control.profiles import load_profile
from kit.control.repository import build, resolved
from kit.control.runtime import ServerOptions, TritonServer, answers_ok, free_port
from kit.control.serve import Door
from kit.control.tasks import link_sources, task_of
from kit.runners.simulated import COUNTERS_ENV, busy_seconds
from perf.engine.inputs import InputSet
from perf.engine.workload import Baseline, Workload

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
    """The workload's deployment profile for its models, each overridden by `setting`
    (e.g. {"radar_classifier": {"instances": 2}}), PyTorch-runner models in the deployment's placement. A model from a
    spec starts from the placement the profile gives it (kit.control.tasks.Generated: its template's, where it has one)."""
    d = workload.deployment
    base = load_profile(d.profile)
    placed = {m: g.placement(base["models"]) for s in workload.specs.values() for m, g in task_of(s).models(s).items()}
    setting = workload.by_role(setting)
    models = {m: merged(placed.get(m) or base["models"].get(m, {}), setting.get(m, {})) for m in workload.models}
    for settings in models.values():
        if settings.get("runner") == "torch":
            settings.update(d.placement)
            if settings.get("device") == "cpu":
                settings.pop("gpus", None)
    target = {"target": base["target"]} if "target" in base else {}  # the applier of a profile named otherwise
    return {"description": f"perf variant of {d.profile}", **target, "models": models}


def model_source(workdir: Path, models: tuple[str, ...]) -> Path:
    """A source folder with only the workload's models, so a variant loads nothing else; made anew each time, so
    that a work folder kept from an earlier run follows the models the workload has now."""
    source = workdir / "source"
    if source.exists():
        shutil.rmtree(source)  # links only
    source.mkdir(parents=True)
    for name in ("profiles", "artifacts.json", "devices"):
        (source / name).symlink_to(SOURCE / name)
    link_sources(models, source)  # a model from a user's spec has no source: the workload passes its spec
    return source


def linked_artifacts(workdir: Path, model_dir: Path, name: str) -> Path:
    """An artifacts folder whose `name/` is the model under test (e.g. `radar/`: the RoBERTa-large stand-in)."""
    artifacts = workdir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    link = artifacts / name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(model_dir.resolve())
    return artifacts


def variant_configs(workload: Workload, setting: dict, model_dir: Path, workdir: Path) -> dict[str, mc.ModelConfig]:
    """The configs a kit variant serves with (profile applied, parameters derived and checked), unbuilt."""
    artifacts = linked_artifacts(workdir, model_dir, workload.artifacts)
    source = model_source(workdir, workload.models)
    configs, _ = resolved(
        workload.deployment.profile, artifacts, source, variant_profile(workload, setting), specs=workload.specs
    )
    return configs


def device_counters(workdir: Path) -> dict[str, float]:
    """A simulated accelerator's busy seconds so far, counted by the target's processes (kit.runners.simulated)."""
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
        self.label = workload.variant_label(self.profile()["models"])
        self.server: TritonServer | None = None
        self.server_args: list[str] = []  # extra tritonserver options (perf.probes.occupancy: request traces)

    def profile(self) -> dict:
        return variant_profile(self.workload, self.setting)

    @property
    def workers(self) -> int:
        return int(self.profile()["models"][self.workload.workers].get("instances", 1))

    def start(self, timeout: float = 600) -> None:
        repository = self.workdir / "repository"
        artifacts = linked_artifacts(self.workdir, self.model_dir, self.workload.artifacts)
        source = model_source(self.workdir, self.workload.models)
        build(self.workload.deployment.profile, repository, artifacts, source, self.profile(), self.workload.specs)
        options = ServerOptions.on_free_ports(
            repository,
            gpu_metrics=self.workload.deployment.on_gpu,
            extra_args=self.server_args,
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

    def load_args(self, inputs: InputSet) -> list[str]:
        return ["-m", self.workload.entry, "-i", "grpc", "-u", self.grpc_url, "--input-data", str(inputs.triton)]

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


def http_load_args(workload: Workload, url: str, route: str, inputs: InputSet) -> list[str]:
    """perf_analyzer's `openai` service kind: each payload of the --input-data file POSTed as a JSON body."""
    host = url.removeprefix("http://")
    return ["-m", workload.entry, "--service-kind", "openai", "--endpoint", route, "-u", host, "--input-data", str(inputs.http)]


class DoorTarget(KitTarget):
    """The kit through its front door (`python -m door`, as `make serve` starts it): JSON over HTTP to the
    workload's door route, Triton behind it on the same variant as the kit target's."""

    family = "door"
    protocol = "http"

    def __init__(self, workload: Workload, setting: dict, model_dir: Path, workdir: Path):
        """`setting` as the kit's, and "door": {"workers": N} for the door's own processes."""
        super().__init__(workload, setting, model_dir, workdir)
        self.door_workers = int(setting.get("door", {}).get("workers", 1))
        self.label += f" door-workers={self.door_workers}"

    def start(self, timeout: float = 600) -> None:
        super().start(timeout)
        log = self.workdir / "door.log"
        self.door = Door(self.grpc_url, "127.0.0.1", free_port(), None, log_path=log, workers=self.door_workers)
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

    def load_args(self, inputs: InputSet) -> list[str]:
        return http_load_args(self.workload, self.http_url, self.route, inputs)

    def stop(self) -> None:
        if getattr(self, "door", None) is not None:
            self.door.stop()
        super().stop()


def baseline_command(baseline: Baseline, setting: dict, port: int) -> list[str]:
    py = sys.executable
    if baseline.server == "flask":
        return [py, "-m", baseline.app.split(":")[0], "--port", str(port)]
    if baseline.server == "gunicorn":
        return [
            py,
            "-m",
            "gunicorn",
            "-k",
            "gthread",
            "-w",
            str(setting["workers"]),
            "--threads",
            str(setting["threads"]),
            "-b",
            f"127.0.0.1:{port}",
            "--timeout",
            "600",
            baseline.app,
        ]
    return [
        py,
        "-m",
        "uvicorn",
        baseline.app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(setting.get("workers", 1)),
        "--log-level",
        "warning",
    ]


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

    def load_args(self, inputs: InputSet) -> list[str]:
        return http_load_args(self.workload, self.http_url, self.route, inputs)

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
