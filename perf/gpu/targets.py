"""The targets of a GPU run: the kit on the gpu-embedded profile, and the RADAR baselines on the same PyTorch model.

`GpuKitTarget` is the engine's KitTarget on the committed gpu-embedded profile (overridden per model by a
setting) instead of the CPU one, built by kit.control.repository from a reduced source: only the workload's
models, and an artifacts manifest that asks a PyTorch-runner model for its checkpoint instead of the ONNX file it
does not serve (the models are generated on the GPU host, where a 1.4 GB ONNX export would cost minutes).

`Placement` says where the networks run. On the GPU: FP16 on `KIND_GPU`, as the profile has it. The CPU dry run
is the one departure from that path: the profile cannot place a PyTorch-runner model on the CPU, so after the
build its config is moved to `KIND_CPU` in FP32 (`place_on_cpu`); everything else is what the GPU run builds.

`GpuRadar` is RADAR's workload with two baselines, Flask per request and FastAPI with the asyncio batcher, each
configured to run the same checkpoint on the kit's PyTorch runner (perf/baselines/radar_model.py) with the
`radar` parameters (length buckets) of the kit's gpu-embedded build.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import RadarSettings
from kit.control.configs import SOURCE, RepositoryError, parameters, parse_config, render_config, set_parameter
from kit.control.profiles import load_profile
from kit.control.repository import build, resolved
from kit.control.runtime import ServerOptions, TritonServer
from perf.engine.spec import load_spec
from perf.engine.targets import KitTarget, linked_artifacts, merged
from perf.engine.workload import Workload
from perf.gpu.plan import RESNET_VARIANTS
from perf.workloads.radar import Radar
from perf.workloads.resnet import RESNET

PROFILE = "gpu-embedded"
CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class Placement:
    device: str  # "cuda": the profile's KIND_GPU instances; "cpu": the dry run
    dtype: str  # the PyTorch runner's precision: fp16 on the GPU, fp32 on the CPU

    @classmethod
    def for_device(cls, device: str) -> Placement:
        return cls(device, "fp16" if device == "cuda" else "fp32")


def torch_models(profile: dict) -> list[str]:
    return [m for m, s in profile["models"].items() if s.get("runner") == "torch"]


def gpu_profile(workload: Workload, setting: dict, placement: Placement) -> dict:
    """The committed gpu-embedded profile for the workload's models, overridden by `setting`, in the placement's dtype."""
    base = load_profile(PROFILE)["models"]
    models = {m: merged(base.get(m, {}), setting.get(m, {})) for m in workload.models}
    for settings in models.values():
        if settings.get("runner") == "torch":
            settings["dtype"] = placement.dtype
    return {"description": "perf.gpu variant", "models": models}


def checkpoint_manifest(manifest: dict, models: list[str]) -> dict:
    """artifacts.json with each of `models` taking only its checkpoint folder, as a required file."""
    out = json.loads(json.dumps(manifest))
    for model in models:
        entry = out["models"][model]
        checkpoints = [p for p in entry.get("files", []) + entry.get("optional", []) if Path(p).name == CHECKPOINT]
        if not checkpoints:
            raise RepositoryError(f"{model}: artifacts.json lists no {CHECKPOINT}/ for the PyTorch runner")
        out["models"][model] = {"files": checkpoints}
    return out


def served_source(workdir: Path, models: tuple[str, ...], profile: dict) -> Path:
    """A source folder with only `models` and the manifest of what they serve (checkpoints, not ONNX files)."""
    source = workdir / "source"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    for name in models:
        (source / name).symlink_to(SOURCE / name)
    manifest = checkpoint_manifest(json.loads((SOURCE / "artifacts.json").read_text()), torch_models(profile))
    (source / "artifacts.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return source


def cpu_config(config: mc.ModelConfig) -> bool:
    """Moves a PyTorch-runner config on the GPU to the CPU in FP32; True when it changed."""
    if parameters(config).get("device") != "cuda":
        return False
    set_parameter(config, "device", "cpu")
    set_parameter(config, "dtype", "fp32")
    for group in config.instance_group:
        group.kind = mc.ModelInstanceGroup.KIND_CPU
        del group.gpus[:]
    return True


def place_on_cpu(repository: Path) -> None:
    """The dry run's one departure from the GPU build: its PyTorch-runner models on KIND_CPU instances, in FP32."""
    for path in repository.glob("*/config.pbtxt"):
        config = parse_config(path.read_text())
        if cpu_config(config):
            path.write_text(render_config(config))


def resolved_configs(workload: Workload, setting: dict, model_dir: Path, workdir: Path, placement: Placement) -> dict:
    """The configs a kit variant serves with (profile applied, parameters derived and checked), unbuilt."""
    profile = gpu_profile(workload, setting, placement)
    artifacts = linked_artifacts(workdir, model_dir, workload.artifacts)
    configs, _ = resolved(PROFILE, artifacts, served_source(workdir, workload.models, profile), profile)
    return configs


def radar_parameters(workload: Workload, model_dir: Path, workdir: Path, placement: Placement) -> dict[str, str]:
    """The `radar` parameters of the committed gpu-embedded build (its length buckets): what every RADAR target pads to."""
    return parameters(resolved_configs(workload, {}, model_dir, workdir, placement)["radar"])


def radar_settings(workload: Workload, model_dir: Path, workdir: Path, placement: Placement) -> RadarSettings:
    return RadarSettings.from_parameters(radar_parameters(workload, model_dir, workdir, placement))


def resnet_variants() -> list[dict]:
    """perf/specs/resnet.json's variants of `resnet50` (none, triton, paddle, cost), in RESNET_VARIANTS' order."""
    settings = load_spec("resnet")["targets"]["kit"]
    by_label = {RESNET.label(gpu_profile(RESNET, s, Placement.for_device("cpu"))["models"]): s for s in settings}
    return [by_label[label] for label in RESNET_VARIANTS]


class GpuKitTarget(KitTarget):
    """Triton with the gpu-embedded profile, overridden per model by `setting`."""

    def __init__(self, workload: Workload, setting: dict, model_dir: Path, workdir: Path, placement: Placement):
        self.placement = placement
        super().__init__(workload, setting, model_dir, workdir)

    def profile(self) -> dict:
        return gpu_profile(self.workload, self.setting, self.placement)

    def start(self, timeout: float = 600) -> None:
        repository = self.workdir / "repository"
        artifacts = linked_artifacts(self.workdir, self.model_dir, self.workload.artifacts)
        profile = self.profile()
        build(PROFILE, repository, artifacts, served_source(self.workdir, self.workload.models, profile), profile)
        if self.placement.device == "cpu":
            place_on_cpu(repository)
        options = ServerOptions.on_free_ports(
            repository, gpu_metrics=self.placement.device == "cuda", extra_args=self.server_args
        )
        self.server = TritonServer(options, log_path=self.workdir / "server.log")
        self.server.start(timeout=timeout)


class GpuRadar(Radar):
    """RADAR with its Flask and asyncio-batcher baselines on the kit's PyTorch runner, padding to the kit's buckets."""

    def __init__(self, radar_parameters: dict[str, str], placement: Placement):
        self.radar_parameters = radar_parameters
        self.placement = placement
        self.baselines = {family: Radar.baselines[family] for family in ("flask", "batcher")}

    def baseline_environment(self, family: str, setting: dict, model_dir: Path, work: Path) -> dict[str, str]:
        env = {
            "RADAR_MODEL_DIR": str(model_dir.resolve()),
            "RADAR_SETTINGS": json.dumps(self.radar_parameters),
            "RADAR_RUNNER": "torch",
            "RADAR_TORCH_DTYPE": self.placement.dtype,
            "RADAR_TORCH_DEVICE": self.placement.device,
        }
        if family == "batcher":
            env |= {"BATCH_SIZE_MAX": str(setting["batch_size_max"]), "BATCH_TIMEOUT": str(setting["batch_timeout_ms"] / 1000)}
        return env
