"""What the kit does for each task a spec names (kit.control.specs): the models it plans for the spec, placed by a
profile (kit.control.profiles), each a ServedModel (kit.control.served); their names, known without an export; the
check `kit add` runs before it writes the spec; and how the spec's checkpoint is exported, where it has one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control import image_task, onnx_task, pipeline_task, ranking_task, text_task, token_task
from kit.control.configs import ARTIFACTS, SOURCE
from kit.control.exports import Exporter
from kit.control.profiles import CANONICAL, Profile
from kit.control.served import ServedModel
from kit.control.specs import ModelSpec, read_specs


@dataclass(frozen=True)
class Task:
    names: Callable[[ModelSpec], dict[str, str]]  # each model it brings, by its part (entry, texts, graph, ...)
    plan: Callable[[ModelSpec, Profile], list[ServedModel]]
    check: Callable[[ModelSpec], str]  # what it checked, in words
    # How a spec's checkpoint is exported (kit.control.exports); None: served as given.
    exporter: Callable[[ModelSpec], Exporter] | None = None


TASKS = {
    "onnx": Task(onnx_task.names, onnx_task.plan, onnx_task.check),
    **{
        task: Task(text_task.names, text_task.plan, text_task.check_text, lambda spec: text_task.EXPORTERS[spec.task])
        for task in text_task.EXPORTERS
    },
    "text-ranking": Task(ranking_task.names, ranking_task.plan, ranking_task.check_ranking, lambda spec: ranking_task.EXPORTER),
    "token-classification": Task(token_task.names, token_task.plan, token_task.check_tokens, lambda spec: token_task.EXPORTER),
    "image-classification": Task(image_task.names, image_task.plan, image_task.check_image, image_task.exporter),
    "pipeline": Task(pipeline_task.names, pipeline_task.plan, pipeline_task.check_pipeline),
}


def task_of(spec: ModelSpec) -> Task:
    """The spec's task: one of TASKS, since a spec of another is refused when it is read (kit.control.specs)."""
    return TASKS[spec.task]


def entry_config(spec: ModelSpec) -> mc.ModelConfig:
    """The config of the spec's entry, the model its clients call, as its task makes it (no profile placed it)."""
    return next(model.config for model in task_of(spec).plan(spec, CANONICAL) if model.name == spec.name)


def shipped_specs(source: Path = SOURCE, artifacts: Path = ARTIFACTS) -> dict[str, ModelSpec]:
    """The specs the kit ships among a model repository's sources (model_repository/*.toml), their exports in
    `artifacts`."""
    return read_specs(source, artifacts=artifacts)


def shipped_models(source: Path = SOURCE) -> list[str]:
    """Every model the kit ships, by name."""
    return sorted(name for spec in shipped_specs(source).values() for name in task_of(spec).names(spec).values())
