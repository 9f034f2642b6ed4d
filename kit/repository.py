"""Build a runnable Triton model repository from the committed sources and a deployment profile.

`model_repository/<model>/config.pbtxt` is the one source of truth for every model (its canonical,
GPU-native form). A profile (`model_repository/profiles/<name>.json`) only changes placement and
backend: instance counts and threads, and on CPU it swaps the `onnxruntime` backend for the kit's
Python-backend ONNX Runtime runner, because the embedded server has no onnxruntime backend.
Every config is parsed and written through Triton's own protobuf schema, so a built repository
cannot hold a config that Triton would reject as malformed.

    python -m kit.repository build --profile cpu --out build/repository/cpu
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from kit.gpu_profile import apply_gpu_profile

REPO_ROOT = Path(__file__).resolve().parent.parent
SOURCE = REPO_ROOT / "model_repository"
ARTIFACTS = REPO_ROOT / "artifacts"
ONNX_RUNNER = Path(__file__).resolve().parent / "backends" / "onnx_runner_model.py"


class RepositoryError(Exception):
    """The repository cannot be built: a source, profile or artifact is missing or invalid."""


def parse_config(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())


def render_config(config: mc.ModelConfig) -> str:
    return text_format.MessageToString(config)


def load_source_config(model: str, source: Path = SOURCE) -> mc.ModelConfig:
    path = source / model / "config.pbtxt"
    try:
        config = parse_config(path.read_text())
    except text_format.ParseError as exc:
        raise RepositoryError(f"{path}: {exc}") from exc
    if config.name != model:
        raise RepositoryError(f"{path}: name {config.name!r} does not match its folder {model!r}")
    return config


def source_models(source: Path = SOURCE) -> list[str]:
    return sorted(p.parent.name for p in source.glob("*/config.pbtxt"))


def load_profile(name: str, source: Path = SOURCE) -> dict:
    path = source / "profiles" / f"{name}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (source / "profiles").glob("*.json")))
        raise RepositoryError(f"no profile {name!r} (known: {known})")
    return json.loads(path.read_text())


def set_parameter(config: mc.ModelConfig, key: str, value) -> None:
    config.parameters[key].string_value = str(value)


def apply_cpu_profile(config: mc.ModelConfig, settings: dict) -> mc.ModelConfig:
    """CPU placement; ONNX models move to the Python-backend runner with their thread count.

    A profile may also tune the batcher (`max_queue_delay_microseconds`, `preferred_batch_size`)
    and set `parameters` (e.g. RADAR's `bucket_count`): the layout search writes these.

    `ragged_batch`: let the batcher hand one execution waiting requests of different shapes. Triton
    otherwise closes a batch at the first shape change, so requests of several length buckets
    interleaved in one queue form batches of little more than one request. Only for ONNX models on
    the runner, which runs each equal-shape group of an execution as one batch (kit.onnx_runner);
    the native onnxruntime backend would try to concatenate them.
    """
    config = mc.ModelConfig.FromString(config.SerializeToString())
    if config.backend == "onnxruntime":
        config.backend = "python"
        set_parameter(config, "onnx_model", "model.onnx")
        set_parameter(config, "intra_op_threads", settings.get("threads", 1))
    del config.instance_group[:]
    config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=int(settings.get("instances", 1)))
    if settings.get("ragged_batch"):
        if "onnx_model" not in config.parameters:
            raise RepositoryError(f"{config.name}: ragged_batch needs the ONNX runner (an onnxruntime model)")
        for tensor in config.input:
            tensor.allow_ragged_batch = True
    if "max_queue_delay_microseconds" in settings:
        config.dynamic_batching.max_queue_delay_microseconds = int(settings["max_queue_delay_microseconds"])
    if "preferred_batch_size" in settings:
        config.dynamic_batching.preferred_batch_size[:] = [int(b) for b in settings["preferred_batch_size"]]
    for key, value in settings.get("parameters", {}).items():
        set_parameter(config, key, value)
    return config


PROFILE_APPLIERS = {"cpu": apply_cpu_profile, "gpu": apply_gpu_profile}


def profile_configs(profile: str, source: Path = SOURCE, spec: dict | None = None) -> dict[str, mc.ModelConfig]:
    """Every model's config for `profile`, derived from the committed sources.

    `spec` replaces the profile file's contents (the perf kit builds variants of a profile this way).
    """
    spec = load_profile(profile, source) if spec is None else spec
    apply = PROFILE_APPLIERS.get(profile)
    if apply is None:
        raise RepositoryError(f"profile {profile!r} has no applier in kit.repository")
    models = source_models(source)
    unknown = set(spec["models"]) - set(models)
    if unknown:
        raise RepositoryError(f"profile {profile!r} names unknown models: {sorted(unknown)}")
    return {m: apply(load_source_config(m, source), spec["models"].get(m, {})) for m in models}


def link_artifacts(model: str, version_dir: Path, artifacts: Path, manifest: dict) -> None:
    entry = manifest["models"].get(model, {})
    for rel in entry.get("files", []) + entry.get("optional", []):
        src = artifacts / rel
        if not src.exists():
            if rel in entry.get("files", []):
                raise RepositoryError(f"{model} needs {src}; run `make export` first")
            continue
        dst = version_dir / Path(rel).name
        dst.symlink_to(src.resolve())


def derived_parameters(model: str, version_dir: Path, config: mc.ModelConfig) -> dict[str, str]:
    """Parameters computed from the artifacts at build time (e.g. RADAR's length buckets)."""
    if model == "radar":
        from kit.text.radar import DEFAULT_BUCKET_COUNT, bucket_parameters

        count = config.parameters["bucket_count"].string_value if "bucket_count" in config.parameters else DEFAULT_BUCKET_COUNT
        return bucket_parameters(version_dir, count=int(count))
    return {}


def build(
    profile: str, out: Path, artifacts: Path = ARTIFACTS, source: Path = SOURCE, spec: dict | None = None
) -> dict[str, mc.ModelConfig]:
    """Write a fresh repository for `profile` (or its variant `spec`) into `out` and return its configs."""
    configs = profile_configs(profile, source, spec)
    manifest = json.loads((source / "artifacts.json").read_text())
    if out.exists():
        shutil.rmtree(out)
    for model, config in configs.items():
        version_dir = out / model / "1"
        version_dir.mkdir(parents=True)
        link_artifacts(model, version_dir, artifacts, manifest)
        model_py = source / model / "1" / "model.py"
        if model_py.is_file():
            shutil.copy2(model_py, version_dir / "model.py")
        elif "onnx_model" in config.parameters:
            shutil.copy2(ONNX_RUNNER, version_dir / "model.py")
        for key, value in derived_parameters(model, version_dir, config).items():
            set_parameter(config, key, value)
        (out / model / "config.pbtxt").write_text(render_config(config))
    return configs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a runnable repository for a profile")
    b.add_argument("--profile", default="cpu")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--artifacts", type=Path, default=ARTIFACTS)
    args = parser.parse_args(argv)
    try:
        configs = build(args.profile, args.out, args.artifacts)
    except RepositoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for model, config in configs.items():
        groups = ", ".join(f"{g.count}x {mc.ModelInstanceGroup.Kind.Name(g.kind)}" for g in config.instance_group)
        print(f"  {model:<20} backend={config.backend:<12} max_batch={config.max_batch_size:<3} instances={groups}")
    print(f"built {args.profile} repository in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
