"""The servers a sweep measures, each started on free ports and stopped by the tool.

`KitTarget` is the kit's Triton on a repository variant generated from the committed sources by
kit.repository (a profile plus overrides, never a hand-copied config). `HttpTarget` is one of the
hand-rolled baselines in perf/baselines, on the same model folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import tritonclient.grpc as grpcclient

from kit.repository import REPO_ROOT, SOURCE, build, load_profile, parse_config, render_config
from kit.runtime import ServerOptions, TritonServer, free_port
from perf.inputs import InputSet

RADAR_MODELS = ("radar", "radar_classifier")
CORES = os.cpu_count() or 1


def merged(base: dict, override: dict) -> dict:
    out = json.loads(json.dumps(base))
    for key, value in override.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def radar_source(workdir: Path) -> Path:
    """A source folder with only the RADAR models, so a variant loads nothing else."""
    source = workdir / "source"
    if not source.exists():
        source.mkdir(parents=True)
        for name in (*RADAR_MODELS, "profiles", "artifacts.json"):
            (source / name).symlink_to(SOURCE / name)
    return source


def radar_artifacts(workdir: Path, model_dir: Path) -> Path:
    """An artifacts folder whose `radar/` is the model under test (e.g. the RoBERTa-large stand-in)."""
    artifacts = workdir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    link = artifacts / "radar"
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


class KitTarget:
    """Triton with the `cpu` profile, overridden per model by `setting` (e.g. {"radar_classifier": {"instances": 2}})."""

    family = "kit"

    def __init__(self, setting: dict, model_dir: Path, workdir: Path, label: str):
        self.setting, self.model_dir, self.workdir, self.label = setting, model_dir, workdir, label
        self.server: TritonServer | None = None

    def profile(self) -> dict:
        base = load_profile("cpu")
        models = {m: merged(base["models"].get(m, {}), self.setting.get(m, {})) for m in RADAR_MODELS}
        return {"description": f"perf variant {self.label}", "models": models}

    @property
    def workers(self) -> int:
        return int(self.profile()["models"]["radar_classifier"].get("instances", 1))

    def start(self) -> None:
        repository = self.workdir / "repository"
        profile = self.profile()
        build("cpu", repository, radar_artifacts(self.workdir, self.model_dir), radar_source(self.workdir), profile)
        for model, settings in profile["models"].items():
            if "queue_timeout_s" in settings:
                patch_queue_timeout(repository / model / "config.pbtxt", settings["queue_timeout_s"])
        self.server = TritonServer(ServerOptions.on_free_ports(repository), log_path=self.workdir / "server.log")
        self.server.start(timeout=600)

    @property
    def pid(self) -> int:
        return self.server.process.pid

    def load_args(self, inputs: InputSet) -> list[str]:
        return ["-m", "radar", "-i", "grpc", "-u", self.server.options.grpc_url, "--input-data", str(inputs.triton)]

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


def baseline_command(family: str, setting: dict, port: int) -> list[str]:
    py = sys.executable
    if family == "flask":
        return [py, "-m", "perf.baselines.flask_radar", "--port", str(port)]
    if family == "gunicorn":
        return [py, "-m", "gunicorn", "-k", "gthread", "-w", str(setting["workers"]), "--threads", str(setting["threads"]),
                "-b", f"127.0.0.1:{port}", "--timeout", "600", "perf.baselines.flask_radar:app"]
    app = "perf.baselines.fastapi_batcher:app" if family == "batcher" else "perf.baselines.fastapi_radar:app"
    return [py, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
            "--workers", str(setting.get("workers", 1)), "--log-level", "warning"]


class HttpTarget:
    """A baseline from perf/baselines; each worker process loads its own model (ORT threads: cores / workers)."""

    def __init__(self, family: str, setting: dict, model_dir: Path, workdir: Path, label: str):
        self.family, self.setting, self.model_dir, self.workdir, self.label = family, setting, model_dir, workdir, label
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def workers(self) -> int:
        return int(self.setting.get("workers", 1))

    def environment(self) -> dict[str, str]:
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env["RADAR_MODEL_DIR"] = str(self.model_dir.resolve())
        env["ORT_THREADS"] = str(self.setting.get("ort_threads", max(1, CORES // self.workers)))
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
            baseline_command(self.family, self.setting, self.port), cwd=REPO_ROOT, env=self.environment(),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.family} exited with code {self.process.returncode}; see {self.log_path}")
            if self.log_path.read_text(errors="replace").count("radar model ready") >= self.workers and self.healthy():
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
        return ["-m", "radar", "--service-kind", "openai", "--endpoint", "predict",
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


def make_target(family: str, setting: dict, model_dir: Path, workdir: Path):
    if family == "kit":
        target = KitTarget(setting, model_dir, workdir, "")
        target.label = kit_label(target.profile())
    else:
        target = HttpTarget(family, setting, model_dir, workdir, " ".join(f"{k}={v}" for k, v in setting.items()) or "default")
    target.workdir = workdir / f"{family}-{target.label}".replace(" ", "_").replace("/", "_")
    return target


def kit_label(profile: dict) -> str:
    """The layout in one line: classifier instances x threads, queue delay, bucket count, entry instances."""
    clf, entry = profile["models"]["radar_classifier"], profile["models"]["radar"]
    delay = clf.get("max_queue_delay_microseconds", "src")
    buckets = entry.get("parameters", {}).get("bucket_count", "5")
    timeout = f" queue-timeout={entry['queue_timeout_s']}s" if "queue_timeout_s" in entry else ""
    ragged = " ragged" if clf.get("ragged_batch") else ""
    return f"{clf.get('instances', 1)}x{clf.get('threads', 1)} delay={delay}us buckets={buckets} entry={entry.get('instances', 1)}{ragged}{timeout}"
