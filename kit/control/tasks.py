"""What the kit does for each task a spec names (kit.control.specs): the model's canonical config, the
files its version folder links, and the check `kit add` runs before it writes the spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control.onnx_task import check_graph, graph_files, onnx_config
from kit.control.specs import ModelSpec, SpecError, check_routes, read_spec


@dataclass(frozen=True)
class Task:
    config: Callable[[ModelSpec], mc.ModelConfig]
    files: Callable[[ModelSpec], dict[str, Path]]
    check: Callable[[ModelSpec], float]  # the largest difference it found between served and direct answers


TASKS = {"onnx": Task(onnx_config, graph_files, check_graph)}


def task_of(spec: ModelSpec) -> Task:
    task = TASKS.get(spec.task)
    if task is None:
        raise spec.error("task", f"is {spec.task!r}, which the kit does not know", f"the tasks are {', '.join(TASKS)}")
    return task


def servable_specs(folder: Path) -> tuple[dict[str, ModelSpec], list[str]]:
    """The specs in `folder` whose model can be configured, and what is wrong with each of the others: a server
    starts with the first and reports the second, so that one bad spec does not stop the other models."""
    specs, refused = {}, []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            spec = read_spec(path)
            task_of(spec).config(spec)
        except SpecError as exc:
            refused.append(str(exc))
            continue
        specs[spec.name] = spec
    check_routes(specs)
    return specs, refused
