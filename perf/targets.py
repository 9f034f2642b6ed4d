"""The servers a sweep measures, each started on free ports and stopped by the tool.

`KitTarget` is the kit's Triton on a repository variant generated from the committed sources by
kit.repository (a profile plus overrides, never a hand-copied config), holding only the models of
the workload under test. `HttpTarget` is one of the hand-rolled baselines in perf/baselines, on the
same model folder. A `Workload` says which models, entry model, endpoint and baselines go together.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tritonclient.grpc as grpcclient

from kit.repository import REPO_ROOT, SOURCE, build, load_profile, parse_config, render_config
from kit.runtime import ServerOptions, TritonServer, free_port
from kit.text.radar import DEFAULT_BUCKET_COUNT
from perf.inputs import InputSet

CORES = os.cpu_count() or 1


def merged(base: dict, override: dict) -> dict:
    out = json.loads(json.dumps(base))
    for key, value in override.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def model_source(workdir: Path, models: tuple[str, ...]) -> Path:
    """A source folder with only the workload's models, so a variant loads nothing else."""
    source = workdir / "source"
    if not source.exists():
        source.mkdir(parents=True)
        for name in (*models, "profiles", "artifacts.json"):
            (source / name).symlink_to(SOURCE / name)
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


def patch_queue_timeout(path: Path, seconds: float) -> None:
    """A perf-only variant: on 2 cores a RoBERTa-large serves ~1.5 texts/s, so 64 or 256 clients wait
    longer than the committed queue timeout; raising it measures throughput there instead of rejections."""
    config = parse_config(path.read_text())
    config.dynamic_batching.default_queue_policy.default_timeout_microseconds = int(seconds * 1e6)
    path.write_text(render_config(config))


def radar_bucket_count(models: dict | None = None) -> int:
    """RADAR's number of length buckets in a profile's models (default: the committed CPU profile's).

    Padding is compute: every target of a run pads chunks to the kit's buckets, so that the kit, the
    baselines and the limit do the same work per chunk and differ only in how they serve it."""
    models = load_profile("cpu")["models"] if models is None else models
    return int(models.get("radar", {}).get("parameters", {}).get("bucket_count", DEFAULT_BUCKET_COUNT))


def kit_label(profile: dict) -> str:
    """The layout in one line: classifier instances x threads, queue delay, bucket count, entry instances."""
    clf, entry = profile["models"]["radar_classifier"], profile["models"]["radar"]
    delay = clf.get("max_queue_delay_microseconds", "src")
    buckets = radar_bucket_count(profile["models"])
    timeout = f" queue-timeout={entry['queue_timeout_s']}s" if "queue_timeout_s" in entry else ""
    ragged = " ragged" if clf.get("ragged_batch") else ""
    return f"{clf.get('instances', 1)}x{clf.get('threads', 1)} delay={delay}us buckets={buckets} entry={entry.get('instances', 1)}{ragged}{timeout}"


def ocr_label(profile: dict) -> str:
    """Instances x threads of each network, then the entry model's instances."""
    models = profile["models"]
    nets = " ".join(f"{m[4:]} {models[m].get('instances', 1)}x{models[m].get('threads', 1)}" for m in ("ocr_det", "ocr_rec", "ocr_cls"))
    timeout = f" queue-timeout={models['ocr']['queue_timeout_s']}s" if "queue_timeout_s" in models["ocr"] else ""
    return f"{nets} entry={models['ocr'].get('instances', 1)}{timeout}"


@dataclass(frozen=True)
class Workload:
    name: str
    models: tuple[str, ...]  # what a kit variant loads
    entry: str  # the model perf_analyzer sends requests to
    workers: str  # the model whose instance count is the kit's "workers / instances"
    label: Callable[[dict], str]  # a kit variant's layout in one line
    endpoint: str  # the baselines' POST path
    model_env: str  # the baselines' environment variable naming the model folder
    apps: dict[str, str]  # baseline family -> the module:app it serves


WORKLOADS = {
    "radar": Workload("radar", ("radar", "radar_classifier"), "radar", "radar_classifier", kit_label, "predict", "RADAR_MODEL_DIR",
                      {"flask": "perf.baselines.flask_radar:app", "gunicorn": "perf.baselines.flask_radar:app",
                       "uvicorn": "perf.baselines.fastapi_radar:app", "batcher": "perf.baselines.fastapi_batcher:app"}),
    "ocr": Workload("ocr", ("ocr", "ocr_det", "ocr_cls", "ocr_rec"), "ocr", "ocr_det", ocr_label, "ocr", "OCR_MODEL_DIR",
                    {"uvicorn": "perf.baselines.fastapi_ocr:app"}),
}


class KitTarget:
    """Triton with the `cpu` profile, overridden per model by `setting` (e.g. {"radar_classifier": {"instances": 2}})."""

    family = "kit"

    def __init__(self, setting: dict, model_dir: Path, workdir: Path, label: str, workload: Workload = WORKLOADS["radar"]):
        self.setting, self.model_dir, self.workdir, self.label, self.workload = setting, model_dir, workdir, label, workload
        self.server: TritonServer | None = None
        self.server_args: list[str] = []  # extra tritonserver options (perf.occupancy: request traces)

    def profile(self) -> dict:
        base = load_profile("cpu")
        models = {m: merged(base["models"].get(m, {}), self.setting.get(m, {})) for m in self.workload.models}
        return {"description": f"perf variant {self.label}", "models": models}

    @property
    def workers(self) -> int:
        return int(self.profile()["models"][self.workload.workers].get("instances", 1))

    def start(self) -> None:
        repository = self.workdir / "repository"
        profile = self.profile()
        artifacts = linked_artifacts(self.workdir, self.model_dir, self.workload.name)
        build("cpu", repository, artifacts, model_source(self.workdir, self.workload.models), profile)
        for model, settings in profile["models"].items():
            if "queue_timeout_s" in settings:
                patch_queue_timeout(repository / model / "config.pbtxt", settings["queue_timeout_s"])
        options = ServerOptions.on_free_ports(repository, extra_args=self.server_args)
        self.server = TritonServer(options, log_path=self.workdir / "server.log")
        self.server.start(timeout=600)

    @property
    def pid(self) -> int:
        return self.server.process.pid

    def load_args(self, inputs: InputSet) -> list[str]:
        return ["-m", self.workload.entry, "-i", "grpc", "-u", self.server.options.grpc_url, "--input-data", str(inputs.triton)]

    def statistics(self) -> dict[str, dict]:
        """Triton's cumulative per-model counters (ns), to split a run's time into queue and compute."""
        client = grpcclient.InferenceServerClient(self.server.options.grpc_url)
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
            }
        return out

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def baseline_command(family: str, setting: dict, port: int, workload: Workload = WORKLOADS["radar"]) -> list[str]:
    py = sys.executable
    if family == "flask":
        return [py, "-m", "perf.baselines.flask_radar", "--port", str(port)]
    if family == "gunicorn":
        return [py, "-m", "gunicorn", "-k", "gthread", "-w", str(setting["workers"]), "--threads", str(setting["threads"]),
                "-b", f"127.0.0.1:{port}", "--timeout", "600", workload.apps[family]]
    return [py, "-m", "uvicorn", workload.apps[family], "--host", "127.0.0.1", "--port", str(port),
            "--workers", str(setting.get("workers", 1)), "--log-level", "warning"]


class HttpTarget:
    """A baseline from perf/baselines; each worker process loads its own model (ORT threads: cores / workers)."""

    def __init__(self, family: str, setting: dict, model_dir: Path, workdir: Path, label: str, workload: Workload = WORKLOADS["radar"]):
        self.family, self.setting, self.model_dir, self.workdir, self.label = family, setting, model_dir, workdir, label
        self.workload = workload
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def workers(self) -> int:
        return int(self.setting.get("workers", 1))

    def environment(self) -> dict[str, str]:
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env[self.workload.model_env] = str(self.model_dir.resolve())
        env["ORT_THREADS"] = str(self.setting.get("ort_threads", max(1, CORES // self.workers)))
        env["RADAR_BUCKET_COUNT"] = str(self.setting.get("bucket_count", radar_bucket_count()))
        if self.family == "batcher":
            env["BATCH_SIZE_MAX"] = str(self.setting["batch_size_max"])
            env["BATCH_TIMEOUT"] = str(self.setting["batch_timeout_ms"] / 1000)
        return env

    def start(self, timeout: float = 600) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = self.workdir / "server.log"
        log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            baseline_command(self.family, self.setting, self.port, self.workload), cwd=REPO_ROOT, env=self.environment(),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
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
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    @property
    def pid(self) -> int:
        return self.process.pid

    def load_args(self, inputs: InputSet) -> list[str]:
        return ["-m", self.workload.entry, "--service-kind", "openai", "--endpoint", self.workload.endpoint,
                "-u", f"127.0.0.1:{self.port}", "--input-data", str(inputs.http)]

    def statistics(self) -> dict:
        return {}

    def stop(self, timeout: float = 30) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def make_target(family: str, setting: dict, model_dir: Path, workdir: Path, workload: str = "radar"):
    w = WORKLOADS[workload]
    if family == "kit":
        target = KitTarget(setting, model_dir, workdir, "", w)
        target.label = w.label(target.profile())
    elif family in w.apps:
        target = HttpTarget(family, setting, model_dir, workdir, " ".join(f"{k}={v}" for k, v in setting.items()) or "default", w)
    else:
        raise ValueError(f"no {family!r} target for {workload} (known: kit, {', '.join(w.apps)})")
    target.workdir = workdir / f"{family}-{target.label}".replace(" ", "_").replace("/", "_")
    return target
