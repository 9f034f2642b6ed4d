"""A spec's models as the kit plans them (kit.control.tasks), by their part (entry, texts, classifier, pixels, ...):
the hand-rolled designs and the limits read a model's settings, files and tensors from them, so that they do the
kit's work without reaching into a task's own module."""

from __future__ import annotations

from kit.adapters.custom_pipeline import ready_definition
from kit.control.profiles import CANONICAL
from kit.control.served import ServedModel
from kit.control.specs import ModelSpec
from kit.control.tasks import task_of
from kit.pipelines.custom import Definition


def planned(spec: ModelSpec) -> dict[str, ServedModel]:
    """The spec's models by part, as its task plans them (exporting its checkpoint first where that is missing or
    stale), placed by no profile."""
    task = task_of(spec)
    models = {model.name: model for model in task.plan(spec, CANONICAL)}
    return {part: models[name] for part, name in task.names(spec).items()}


def entry_pipeline(spec: ModelSpec) -> Definition:
    """A `pipeline` spec's module, loaded as its entry loads it (kit.adapters.custom_pipeline): with the settings the
    task planned from the spec's `parameters`, its files beside it."""
    entry = planned(spec)["entry"]
    module = entry.files[entry.settings.pipeline_module]
    return ready_definition(module, entry.settings, module.parent)
