"""Build a runnable Triton model repository from the committed sources and a deployment profile.

`model_repository/<model>/config.pbtxt`, or the shipped spec that brings the model (`model_repository/*.toml`,
made into configs by its task, kit.control.tasks, as a user's spec in models/ is), is the one source of truth for
every model (its canonical, GPU-native form). A profile (`model_repository/profiles/<name>.json`) only changes placement,
backend and batching, through its target's applier (kit.control.cpu_profile, gpu_profile,
gpu_embedded_profile). The builder then adds the parameters computed from other configs and the
exports (kit.control.derived) and checks every Python-backend model's parameters against its typed
settings (kit.adapters.settings).

    python -m kit.control.repository build --profile cpu --out build/repository/cpu
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import PipelineSettings, SettingsError, settings_class
from kit.control.configs import (
    ARTIFACTS,
    SOURCE,
    RepositoryError,
    load_source_config,
    parameters,
    render_config,
    set_parameter,
    source_models,
)
from kit.control.cpu_profile import apply_cpu_profile
from kit.control.derived import check_one_canary, check_queue_bounds, derived_parameters
from kit.control.gpu_embedded_profile import apply_gpu_embedded_profile
from kit.control.gpu_profile import apply_gpu_profile
from kit.control.pipeline_task import check_module_settings
from kit.control.profiles import apply_ensemble, load_profile
from kit.control.specs import DOOR_ANSWER, DOOR_ANSWERS, DOOR_SCHEMA, MODELS, TENSORS, ModelSpec, check_routes, read_specs
from kit.control.tasks import shipped_specs, spec_models, task_of
from kit.runners.simulated import Curve, SimulationError

ADAPTERS = Path(__file__).resolve().parents[1] / "adapters"
# The runner installed as model.py, by the parameter that names the model file it serves.
RUNNERS = {
    "onnx_model": ADAPTERS / "onnx_runner_model.py",
    "torch_model": ADAPTERS / "torch_runner_model.py",
    "sim_table": ADAPTERS / "sim_runner_model.py",
}
# The adapter installed as model.py where a model's folder has none, by a parameter only its models have: a runner,
# a text classifier's texts (RADAR's and every text-classification spec's, kit.control.text_task), an image
# classifier's pixels, or the entry of a classifier of pixels (kit.control.image_task), or a user's pipeline
# (kit.control.pipeline_task).
ADAPTERS_BY_PARAMETER = RUNNERS | {
    "aggregation": ADAPTERS / "pair_ranker_model.py",
    "batches_in_flight": ADAPTERS / "text_classifier_model.py",
    "preprocessing": ADAPTERS / "image_pixels_model.py",
    "backbone": ADAPTERS / "padded_classifier_model.py",
    "pipeline_module": ADAPTERS / "pipeline_model.py",
}
# The simulated accelerator's device tables (kit.runners.simulated): the sim runner's `sim_table` names one.
DEVICES = "devices"
FIRST_VERSION = 1  # a build's; kit.control.deploy adds the next ones
ENSEMBLE = "ensemble"
APPLIERS = {"cpu": apply_cpu_profile, "gpu": apply_gpu_profile, "gpu-embedded": apply_gpu_embedded_profile}


def profile_configs(
    profile: str, source: Path = SOURCE, spec: dict | None = None, specs: Mapping[str, ModelSpec] | None = None
) -> dict[str, mc.ModelConfig]:
    """Every model's config for `profile`, derived from the committed sources and the model specs (kit.control.specs;
    those of models/ unless given): a spec's task gives its canonical config, which the profile places like any other.

    `spec` replaces the profile file's contents (the perf kit builds variants of a profile this way).
    """
    spec = load_profile(profile, source) if spec is None else spec
    target = spec.get("target", profile)  # a profile of another name says which target's applier it takes
    apply = APPLIERS.get(target)
    if apply is None:
        raise RepositoryError(f"profile {profile!r} has no applier for {target!r} (known: {', '.join(APPLIERS)})")
    models = source_models(source)
    shipped, users = shipped_specs(source), read_specs() if specs is None else dict(specs)
    for name in sorted(set(shipped) & set(users)):
        raise RepositoryError(f"{users[name].path}: {name!r} is a model the kit ships; name the spec otherwise")
    check_routes(shipped | users)
    brought = spec_models(shipped | users, models)
    unknown = set(spec["models"]) - set(models) - set(brought)
    if unknown:
        raise RepositoryError(f"profile {profile!r} names unknown models: {sorted(unknown)}")
    configs = {}
    for m in models:
        config = load_source_config(m, source)
        configs[m] = (apply_ensemble if config.platform == ENSEMBLE else apply)(config, spec["models"].get(m, {}))
    for name, (_, generated) in brought.items():
        place = apply_ensemble if generated.config.platform == ENSEMBLE else apply
        configs[name] = place(generated.config, generated.placement(spec["models"]))
    return configs


def pin_steps(config: mc.ModelConfig, version: int) -> None:
    """An ensemble's steps call their models' `version`: ensemble N runs the models of version N, so that a new
    version is checked before any client's request reaches it (kit.control.deploy)."""
    for step in config.ensemble_scheduling.step:
        step.model_version = version


def check_steps(config: mc.ModelConfig, configs: dict[str, mc.ModelConfig]) -> None:
    missing = sorted({step.model_name for step in config.ensemble_scheduling.step} - set(configs))
    if missing:
        raise RepositoryError(f"{config.name}: its ensemble steps name {missing}, which are not in the repository")


def artifact_files(model: str, artifacts: Path, manifest: dict) -> dict[str, Path]:
    """The export files `model` takes (artifacts.json), by file name; a missing required one is an error."""
    entry = manifest["models"].get(model, {})
    files = {}
    for rel in entry.get("files", []) + entry.get("optional", []):
        path = artifacts / rel
        if path.exists():
            files[path.name] = path
        elif rel in entry.get("files", []):
            raise RepositoryError(f"{model} needs {path}; run `make export` first")
    return files


TABLES = (("sim_table", "curve", "precision"), ("merge_table", "merge_curve", "merge_precision"))


def device_tables(config: mc.ModelConfig, source: Path) -> dict[str, Path]:
    """The device tables a model reads (a simulated accelerator's `sim_table`, the `merge_table` that prices its
    runs), as files of its version folder."""
    params, files = parameters(config), {}
    for table_key, _, _ in TABLES:
        table = params.get(table_key)
        if table is None:
            continue
        path = source / DEVICES / table
        if not path.is_file():
            known = sorted(p.name for p in (source / DEVICES).glob("*.json"))
            raise RepositoryError(f"{config.name}: no device table {table} in model_repository/{DEVICES} (known: {known})")
        files[table] = path
    return files


def check_device_tables(config: mc.ModelConfig, files: dict[str, Path]) -> None:
    """Each device table has the rows its model names, at its precision: refused at build, not at load."""
    params = parameters(config)
    for table_key, curve_key, precision_key in TABLES:
        if table_key in params:
            try:
                Curve.from_file(files[params[table_key]], params.get(curve_key, ""), params.get(precision_key, "fp16"))
            except SimulationError as exc:
                raise RepositoryError(f"{config.name}: {table_key} {params[table_key]}: {exc}") from None


def check_settings(model: str, config: mc.ModelConfig, files: dict[str, Path]) -> None:
    """A Python-backend model's parameters against its typed settings, and an ensemble's where it has some (the
    door reads `radar`'s)."""
    params = parameters(config)
    kind = settings_class(params)
    if config.backend == "python":
        for runner in RUNNERS:  # the graph or checkpoint the profile's runner serves, whichever the export wrote
            served = params.get(runner)
            if served is not None and served not in files:
                raise RepositoryError(f"{model} serves {served}, which the export did not write; run `make export`")
        if kind is None:
            raise RepositoryError(f"{model}: a Python-backend model without typed settings in kit.adapters.settings")
    if kind is not None and (config.backend == "python" or config.platform == ENSEMBLE):
        try:
            settings = kind.from_parameters(params)
        except SettingsError as exc:
            raise RepositoryError(f"{model}: {exc}") from None
        if isinstance(settings, PipelineSettings):
            check_module_settings(model, settings, files)


def check_door(model: str, config: mc.ModelConfig) -> None:
    """A config the door serves names an answer the door gives, and a JSON document's answer its JSON Schema."""
    params = parameters(config)
    answer = params.get(DOOR_ANSWER, TENSORS)
    if answer not in DOOR_ANSWERS:
        raise RepositoryError(f"{model}: {DOOR_ANSWER} {answer!r} is not one of {', '.join(DOOR_ANSWERS)}")
    if (answer == "image-document") != (DOOR_SCHEMA in params):
        raise RepositoryError(f"{model}: {DOOR_SCHEMA} (the document's JSON Schema) goes with {DOOR_ANSWER} image-document")
    try:
        json.loads(params.get(DOOR_SCHEMA, "{}"))
    except json.JSONDecodeError as exc:
        raise RepositoryError(f"{model}: {DOOR_SCHEMA} is not JSON ({exc})") from None


def check_shipped_sources(specs: Mapping[str, ModelSpec], manifest: dict) -> None:
    """A shipped spec's `source` is its export's folder in the artifacts folder: where artifacts.json takes the files of
    each of its models from."""
    for spec in specs.values():
        if spec.task == "pipeline":  # its source is its module; artifacts.json lists its entry's files by model
            continue
        for model in task_of(spec).models(spec):
            listed = manifest["models"].get(model, {})
            paths = [*listed.get("files", []), *listed.get("optional", [])]
            elsewhere = [path for path in paths if not path.startswith(f"{spec.source}/")]
            if elsewhere or not paths:
                found = f"takes {model}'s files from {elsewhere}" if elsewhere else f"lists no file of {model}"
                raise spec.error("source", f"is {spec.source!r}, but artifacts.json {found}", "name the export's folder")


def resolved(
    profile: str,
    artifacts: Path = ARTIFACTS,
    source: Path = SOURCE,
    spec: dict | None = None,
    models: Iterable[str] | None = None,
    specs: Mapping[str, ModelSpec] | None = None,
) -> tuple[dict[str, mc.ModelConfig], dict[str, dict[str, Path]]]:
    """The configs a build writes (profile applied, parameters derived and checked), and each model's files;
    of `models` only (a new version of them, kit.control.deploy), or of every model."""
    brought = read_specs() if specs is None else specs
    configs = profile_configs(profile, source, spec, brought)
    chosen = list(configs) if models is None else list(models)
    manifest = json.loads((source / "artifacts.json").read_text())
    shipped = shipped_specs(source)
    check_shipped_sources(shipped, manifest)
    brought_files = {model: files for s in brought.values() for model, files in task_of(s).files(s).items()}
    # A shipped pipeline's entry runs its module (with its FILES), besides the export's files artifacts.json lists.
    modules = {s.name: task_of(s).files(s)[s.name] for s in shipped.values() if s.task == "pipeline"}
    files = {
        model: (brought_files[model] if model in brought_files else artifact_files(model, artifacts, manifest))
        | modules.get(model, {})
        | device_tables(configs[model], source)
        for model in chosen
    }
    check_queue_bounds(configs)
    check_one_canary(configs)
    for model in chosen:
        config = configs[model]
        for key, value in derived_parameters(config, configs, files[model]).items():
            set_parameter(config, key, value)
        check_settings(model, config, files[model])
        check_door(model, config)
        check_device_tables(config, files[model])
        if config.platform == ENSEMBLE:
            check_steps(config, configs)
            pin_steps(config, FIRST_VERSION)
    return {model: configs[model] for model in chosen}, files


def model_file(config: mc.ModelConfig, source: Path = SOURCE) -> Path | None:
    """The model.py a Python-backend model runs: its own folder's, else the adapter its parameters name."""
    own = source / config.name / "1" / "model.py"
    adapters = [path for key, path in ADAPTERS_BY_PARAMETER.items() if key in config.parameters]
    return own if own.is_file() else (adapters[0] if adapters else None)


def write_version(folder: Path, version: int, config: mc.ModelConfig, files: dict[str, Path], source: Path = SOURCE) -> None:
    """One model's version folder: the exported files linked, its model.py copied."""
    version_dir = folder / str(version)
    version_dir.mkdir(parents=True)
    for name, path in files.items():
        (version_dir / name).symlink_to(path.resolve())
    model_py = model_file(config, source)
    if model_py is not None:
        shutil.copy2(model_py, version_dir / "model.py")


def build(
    profile: str,
    out: Path,
    artifacts: Path = ARTIFACTS,
    source: Path = SOURCE,
    spec: dict | None = None,
    specs: Mapping[str, ModelSpec] | None = None,
) -> dict[str, mc.ModelConfig]:
    """Write a fresh repository for `profile` (or its variant `spec`), with the models specified in `specs`, into
    `out` and return its configs."""
    configs, files = resolved(profile, artifacts, source, spec, specs=specs)
    if out.exists():
        shutil.rmtree(out)
    for model, config in configs.items():
        write_version(out / model, FIRST_VERSION, config, files[model], source)
        (out / model / "config.pbtxt").write_text(render_config(config))
    return configs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a runnable repository for a profile")
    b.add_argument("--profile", default="cpu")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--artifacts", type=Path, default=ARTIFACTS)
    b.add_argument("--models", type=Path, default=MODELS, help="the folder of model specs (docs/MODELS.md)")
    args = parser.parse_args(argv)
    try:
        configs = build(args.profile, args.out, args.artifacts, specs=read_specs(args.models))
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
