"""What the kit does for each task a spec names (kit.control.specs): the models it serves for the spec (their
canonical configs, and how each profile places them), the files their version folders link, and the check `kit add`
runs before it writes the spec."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import PipelineSettings
from kit.control.configs import (
    SOURCE,
    RepositoryError,
    copy_config,
    load_source_config,
    parameters,
    set_parameter,
    source_models,
)
from kit.control.exports import Exporter
from kit.control.image_task import ENTRY_PLACEMENT, check_image, exporter, image_configs, image_files
from kit.control.onnx_task import check_graph, graph_files, onnx_config
from kit.control.pipeline_task import check_pipeline, pipeline_configs, pipeline_files, pipeline_of
from kit.control.ranking_task import EXPORTER as RANKING_EXPORTER
from kit.control.ranking_task import check_ranking, ranking_configs, ranking_files
from kit.control.specs import DOOR_DESCRIPTION, ModelSpec, SpecError, check_routes, read_spec, read_specs
from kit.control.text_task import EXPORTERS, check_text, text_configs, text_files
from kit.pipelines.custom import Definition

# What a generated model takes of its template's placement in a profile: where and how it runs (instances, threads,
# batch cap, runner, GPUs and precision), not what was tuned or measured for the template's own network (its queue
# delay and preferred batch sizes, a device curve and the merge it prices, TensorRT shapes and precision for its
# token limit), nor the simulated runner, which needs such a curve.
PLACEMENT = frozenset(
    {"instances", "threads", "graph", "ragged_batch", "parameters", "runner", "dtype", "gpus", "cuda_graphs", "max_batch_size"}
)
# A text model's graph takes its template's queue policy too: on a GPU profile it has none (kit.control.profiles'
# `queue_policy: false`, so that Triton's batcher gathers the next batch while the device runs one), bounded by its
# texts model's window as the template's is (kit.control.derived.check_queue_bounds). Another task's graph keeps its
# own: nothing in front of it would bound what waits.
TEXT_PLACEMENT = PLACEMENT | {"queue_policy"}
SIMULATED = "sim"


@dataclass(frozen=True)
class Generated:
    """One model a spec brings: its canonical config, the shipped model whose placement it takes in each profile
    (`like`), and the profile settings the spec itself gives it (`settings`, which the template's leave alone)."""

    config: mc.ModelConfig
    like: str = ""
    settings: dict = field(default_factory=dict)
    takes: frozenset[str] = PLACEMENT  # the settings of the template's placement it takes

    def placement(self, profile_models: dict) -> dict:
        """This model's settings for a profile whose models' settings are `profile_models`."""
        template = profile_models.get(self.like, {})
        if template.get("runner") == SIMULATED:
            template = {k: v for k, v in template.items() if k not in ("runner", "gpus")}
        placed = {k: v for k, v in template.items() if k in self.takes and k not in self.settings}
        if "max_batch_size" in placed:  # the config's own preferred sizes, within the cap the profile sets
            cap = int(placed["max_batch_size"])
            placed["preferred_batch_size"] = [b for b in self.config.dynamic_batching.preferred_batch_size if b <= cap]
        params = placed.get("parameters", {}) | self.settings.get("parameters", {})
        return placed | self.settings | ({"parameters": params} if params else {}) | profile_models.get(self.config.name, {})


@dataclass(frozen=True)
class Task:
    models: Callable[[ModelSpec], dict[str, Generated]]
    files: Callable[[ModelSpec], dict[str, dict[str, Path]]]  # by model, each file by its name in the version folder
    check: Callable[[ModelSpec], str]  # what it checked, in words
    # How a spec's checkpoint is exported (kit.control.exports); None: served as given.
    exporter: Callable[[ModelSpec], Exporter] | None = None


def onnx_models(spec: ModelSpec) -> dict[str, Generated]:
    return {spec.name: Generated(onnx_config(spec), settings={"instances": spec.instances})}


def onnx_check(spec: ModelSpec) -> str:
    return f"checked {spec.source_path}: batched rows against single rows differ by at most {check_graph(spec):.3g}"


def text_models(spec: ModelSpec) -> dict[str, Generated]:
    configs = text_configs(spec)
    return {name: Generated(config, like, settings, TEXT_PLACEMENT) for name, (config, like, settings) in configs.items()}


def ranking_models(spec: ModelSpec) -> dict[str, Generated]:
    configs = ranking_configs(spec)
    return {name: Generated(config, like, settings, TEXT_PLACEMENT) for name, (config, like, settings) in configs.items()}


def image_models(spec: ModelSpec) -> dict[str, Generated]:
    entry_takes = ENTRY_PLACEMENT if spec.input == "pixels" else PLACEMENT
    return {
        name: Generated(config, like, settings, entry_takes if name == spec.name else PLACEMENT)
        for name, (config, like, settings) in image_configs(spec).items()
    }


def pipeline_models(spec: ModelSpec) -> dict[str, Generated]:
    return {name: Generated(config, like, settings) for name, (config, like, settings) in pipeline_configs(spec).items()}


TASKS = {
    "onnx": Task(onnx_models, lambda spec: {spec.name: graph_files(spec)}, onnx_check),
    **{task: Task(text_models, text_files, check_text, lambda spec: EXPORTERS[spec.task]) for task in EXPORTERS},
    "text-ranking": Task(ranking_models, ranking_files, check_ranking, lambda spec: RANKING_EXPORTER),
    "image-classification": Task(image_models, image_files, check_image, exporter),
    "pipeline": Task(pipeline_models, pipeline_files, check_pipeline),
}


def task_of(spec: ModelSpec) -> Task:
    task = TASKS.get(spec.task)
    if task is None:
        raise spec.error("task", f"is {spec.task!r}, which the kit does not know", f"the tasks are {', '.join(TASKS)}")
    return task


def spec_models(specs: dict[str, ModelSpec], shipped: list[str]) -> dict[str, tuple[ModelSpec, Generated]]:
    """Every model the specs bring, by name, with its spec; a name a shipped model or another spec has is refused."""
    models: dict[str, tuple[ModelSpec, Generated]] = {}
    for spec in specs.values():
        for name, generated in described(spec, task_of(spec).models(spec)).items():
            other = models.get(name, (None,))[0]
            if name in shipped or (other is not None and other.shipped):
                raise RepositoryError(f"{spec.path}: {name!r} is a model the kit ships; name the spec otherwise")
            if other is not None:
                raise RepositoryError(f"{spec.path}: its model {name!r} is also {other.path}'s; name one of them otherwise")
            models[name] = (spec, generated)
    return models


def described(spec: ModelSpec, models: dict[str, Generated]) -> dict[str, Generated]:
    """The spec's models, its entry carrying the spec's description of its route, where it gives one."""
    if not spec.description:
        return models
    entry = copy_config(models[spec.name].config)
    set_parameter(entry, DOOR_DESCRIPTION, spec.description)
    return models | {spec.name: replace(models[spec.name], config=entry)}


def shipped_specs(source: Path) -> dict[str, ModelSpec]:
    """The specs the kit ships among a model repository's sources (model_repository/*.toml)."""
    return read_specs(source, shipped=True)


def canonical_models(source: Path = SOURCE) -> list[str]:
    """Every shipped model: those with a committed config, and those a shipped spec brings."""
    brought = [name for spec in shipped_specs(source).values() for name in task_of(spec).models(spec)]
    return sorted(source_models(source) + brought)


def canonical_config(model: str, source: Path = SOURCE) -> mc.ModelConfig:
    """A shipped model's canonical config, before any profile: its committed one, or the one its spec brings."""
    if model in source_models(source):
        return load_source_config(model, source)
    for spec in shipped_specs(source).values():
        generated = described(spec, task_of(spec).models(spec))
        if model in generated:
            return copy_config(generated[model].config)
    raise RepositoryError(f"{model!r} is not a model of {source}: no {model}/config.pbtxt and no spec brings it")


def shipped_pipeline(model: str, source: Path = SOURCE) -> tuple[Definition, object]:
    """A shipped pipeline spec's module and the SETTINGS its entry reads (from its canonical config): what the
    benchmarks' baselines and probes run in their own process, to do the served model's work."""
    pipeline = pipeline_of(shipped_specs(source)[model])
    settings = PipelineSettings.from_parameters(parameters(canonical_config(model, source)))
    return pipeline, settings.module_settings(pipeline.settings)


def servable_specs(folder: Path) -> tuple[dict[str, ModelSpec], list[str]]:
    """The specs in `folder` whose models can be configured, and what is wrong with each of the others: a server
    starts with the first and reports the second, so that one bad spec does not stop the other models."""
    specs, refused = {}, []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            spec = read_spec(path)
            task_of(spec).models(spec)
        except SpecError as exc:
            refused.append(str(exc))
            continue
        specs[spec.name] = spec
    check_routes(specs)
    return specs, refused


def link_sources(models: Iterable[str], target: Path, source: Path = SOURCE) -> None:
    """Links into `target` the sources of `models`, for a build of those alone: each one's committed folder, and each
    shipped spec that brings any of them."""
    wanted = set(models)
    for name in sorted(wanted):
        if (source / name).is_dir():
            (target / name).symlink_to(source / name)
    for spec in shipped_specs(source).values():
        if wanted & set(task_of(spec).models(spec)):
            (target / spec.path.name).symlink_to(spec.path)
            if spec.task == "pipeline":  # the module, and the door's schema, that the spec names beside it
                for path in (spec.source_path, spec.schema_path if spec.door_schema else None):
                    if path is not None and not (target / path.name).exists():
                        (target / path.name).symlink_to(path)
