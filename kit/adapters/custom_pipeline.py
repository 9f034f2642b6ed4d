"""A user's pipeline module (kit.pipelines.custom) loaded from its file, with its networks either as batched models of
this server (BLS: what the `pipeline` task's entry model serves) or as ONNX Runtime sessions in this process (the
check `kit add` runs, and the tests' reference)."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

from kit.adapters.settings import PipelineSettings
from kit.adapters.triton import infer
from kit.pipelines.batching.padding import split_rows
from kit.pipelines.custom import Definition, DefinitionError, Networks, answer, definition
from kit.runners.batched import group_by_shape


def load_definition(path: Path) -> Definition:
    """The pipeline `path` declares. Its folder goes on the import path first, so that the module may import its
    own helpers beside it; a module that fails to import is a DefinitionError that says why."""
    path = Path(path).resolve()
    name = "kit_pipeline_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise DefinitionError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: whatever it raises, say so and where
        raise DefinitionError(f"{path}: importing it failed: {type(exc).__name__}: {exc}") from None
    finally:
        if added:
            sys.path.remove(folder)
    return definition(vars(module), str(path))


def ready_definition(path: Path, settings: PipelineSettings, folder: Path) -> Definition:
    """The pipeline at `path`, loaded with its module's settings from the entry's parameters (a SettingsError when
    they do not fit its SETTINGS) and `folder`, where its files are."""
    pipeline = load_definition(path)
    return pipeline.loaded(settings.module_settings(pipeline.settings), folder)


def pipeline_networks(pipeline: Definition, settings: PipelineSettings, folder: Path) -> Networks:
    """The networks as the entry's `engines` say: models of this server, or its graphs in this process."""
    if settings.engines == "in_process":
        return in_process_networks(pipeline, folder, settings.max_rows, settings.intra_op_threads)
    return served_networks(settings.networks, json.loads(settings.network_rows))


def in_process_networks(pipeline: Definition, folder: Path, max_rows: int = 0, threads: int = 1) -> Networks:
    """The pipeline's graphs (beside its module, in `folder`) run by ONNX Runtime in this process."""
    from kit.runners.onnx import Graphs  # onnxruntime only where the networks run in this process

    return Networks(pipeline.networks, Graphs({n: folder / file for n, file in pipeline.networks.items()}, threads), max_rows)


def served_networks(models: str, max_rows: dict[str, int]) -> Networks:
    """The pipeline's networks as models of this server: `models` is the builder's JSON of each network's model and
    output names (kit.control.pipeline_task), `max_rows` the most rows each model takes (kit.control.pipeline_task). A
    network's failure, its refusal of the inputs included, is a ModelCallError: Triton 2.51's Python backend hands BLS
    errors back without their code, so a refusal of bad input cannot be told from a full queue."""
    served = json.loads(models)

    async def call(name: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        model, outputs = served[name]["model"], served[name]["outputs"]
        return dict(zip(outputs, await infer(model, inputs, outputs)))

    return Networks(served, call, max_rows)


async def answer_many(
    pipeline: Definition, requests: list[dict[str, np.ndarray]], networks: Networks, rows: bool = True
) -> list[dict[str, np.ndarray] | Exception]:
    """Each request's answer or its own exception. The requests of one shape run as one batch of rows, one `run` and
    one call per network for all of them (`kit add` checked that rows do not change each other), as a hand-rolled
    batcher runs its queue; when a group's run fails, its requests run one by one, so only a bad one fails. Requests
    without rows (`rows` false: an unbatched entry's) each run alone, concurrently."""
    results: list[dict[str, np.ndarray] | Exception] = [RuntimeError("not run")] * len(requests)

    async def alone(index: int) -> None:
        try:
            results[index] = await answer(pipeline, requests[index], networks, rows)
        except Exception as exc:  # the request's own: bad input, a refused network, a bug in `run`
            results[index] = exc

    async def together(indices: list[int]) -> None:
        merged = {name: np.concatenate([requests[i][name] for i in indices]) for name in requests[indices[0]]}
        try:
            outputs = await answer(pipeline, merged, networks)
        except Exception:  # which request is at fault shows only when each runs alone
            await asyncio.gather(*(alone(i) for i in indices))
            return
        counts = [len(next(iter(requests[i].values()))) for i in indices]
        parts = {name: split_rows(value, counts) for name, value in outputs.items()}
        for position, i in enumerate(indices):
            results[i] = {name: rows[position] for name, rows in parts.items()}

    groups = group_by_shape(requests) if rows else [[i] for i in range(len(requests))]
    await asyncio.gather(*(together(g) if len(g) > 1 else alone(g[0]) for g in groups))
    return results
