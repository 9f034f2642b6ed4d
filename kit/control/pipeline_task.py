"""The `pipeline` task: the escape hatch for custom pre- and post-processing. The spec's source is the user's Python
module (kit.pipelines.custom: NETWORKS, INPUTS, OUTPUTS and `async def run(inputs, networks)`).

A spec `NAME` becomes the entry `NAME`, a Python model on kit/adapters/pipeline_model.py whose tensors are the
module's INPUTS and OUTPUTS (rows first, batched as the spec says, with a bounded queue), and one model
`NAME_<network>` per graph of NETWORKS, configured as the `onnx` task configures a graph (kit.control.onnx_task)
and placed in each profile as such a model is. The entry calls them over BLS, so the network calls of concurrent
requests are batched together, and the door serves the entry's tensors at its route.

`kit add`'s check loads the module and its graphs and runs the pipeline in this process (kit.adapters.
custom_pipeline) on random rows (or the module's EXAMPLE), batched and one row at a time: its answers must fit
OUTPUTS, and a batch's rows must equal the rows run alone, since the server batches concurrent requests' rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from pathlib import Path

import numpy as np
from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.custom_pipeline import in_process_networks, load_definition
from kit.control.configs import config_type, set_parameter
from kit.control.onnx_task import ATOL, CHECK_ROWS, RTOL, bounded_batching, example_inputs, graph_files, onnx_config
from kit.control.specs import DOOR_ROUTE, ModelSpec
from kit.pipelines.custom import Definition, DefinitionError, answer

MODULE = "pipeline.py"  # the module's name in the entry's version folder
IN_FLIGHT_PER_BATCH = 4  # requests under way at once, in full batches of the entry


@functools.lru_cache(maxsize=16)
def loaded(path: Path, modified_ns: int) -> Definition:
    """The module at `path` imported once per version of the file: the check, every profile's configs and the build's
    files all ask for it, and importing runs the user's code."""
    return load_definition(path)


def pipeline_of(spec: ModelSpec) -> Definition:
    if spec.source_path.suffix != ".py":
        raise spec.error("source", f"names {spec.source_path.name}, not a Python module", "point it at the pipeline's .py file")
    try:
        return loaded(spec.source_path, spec.source_path.stat().st_mtime_ns)
    except DefinitionError as exc:
        raise spec.error("source", f"does not declare a pipeline: {exc}", "see docs/MODELS.md, the pipeline task") from None


def network_spec(spec: ModelSpec, network: str, graph: str) -> ModelSpec:
    """The spec of one network, as the `onnx` task would read a spec of its graph (same batching and instances)."""
    source = (spec.source_path.parent / graph).resolve()
    if not source.is_file():
        raise spec.error(
            "source", f"declares the network {network!r} as {graph}, which is not a file beside it", "export it there"
        )
    return dataclasses.replace(spec, name=f"{spec.name}_{network}", source=str(source), route="")


def network_configs(spec: ModelSpec, pipeline: Definition) -> dict[str, mc.ModelConfig]:
    """Each network's config, as the `onnx` task's but without a door route: a network is the entry's to call."""
    networks = pipeline.networks.items()
    return {network: onnx_config(network_spec(spec, network, graph), routed=False) for network, graph in networks}


def pipeline_configs(spec: ModelSpec) -> dict[str, tuple[mc.ModelConfig, str, dict]]:
    """The entry's and each network's canonical config, with the profile settings the spec gives each."""
    if spec.max_batch_size == 0:
        raise spec.error("max_batch_size", "is 0", "a pipeline's entry takes rows first: 1 or more")
    pipeline = pipeline_of(spec)
    networks = network_configs(spec, pipeline)
    entry = mc.ModelConfig(name=spec.name, backend="python")
    for tensors, add in ((pipeline.inputs, entry.input.add), (pipeline.outputs, entry.output.add)):
        for tensor in tensors:
            add(name=tensor.name, data_type=config_type(tensor.data_type), dims=list(tensor.dims))
    served = {n: {"model": c.name, "outputs": [o.name for o in c.output]} for n, c in networks.items()}
    parameters = {
        "pipeline_module": MODULE,
        "networks": json.dumps(served, separators=(",", ":")),
        "max_rows": spec.max_batch_size,
        "requests_in_flight": IN_FLIGHT_PER_BATCH * spec.max_batch_size,
        DOOR_ROUTE: spec.door_route,
    }
    for key, value in parameters.items():
        set_parameter(entry, key, value)
    entry.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
    bounded_batching(entry, spec)
    own = {"instances": spec.instances}
    return {spec.name: (entry, "", {})} | {config.name: (config, "", own) for config in networks.values()}


def pipeline_files(spec: ModelSpec) -> dict[str, dict[str, Path]]:
    """The module the entry loads, and each network's graph."""
    pipeline = pipeline_of(spec)
    files = {spec.name: {MODULE: spec.source_path}}
    for network, graph in pipeline.networks.items():
        files[f"{spec.name}_{network}"] = graph_files(network_spec(spec, network, graph))
    return files


def check_pipeline(spec: ModelSpec) -> str:
    """`kit add`'s check: the pipeline run in this process on random rows (or its EXAMPLE), batched and one row at a
    time."""
    pipeline = pipeline_of(spec)
    entry, *_ = pipeline_configs(spec)[spec.name]
    networks = in_process_networks(pipeline, spec.source_path.parent, spec.max_batch_size)
    inputs = pipeline.example if pipeline.example is not None else example_inputs(entry, CHECK_ROWS)
    rows = len(next(iter(inputs.values())))

    async def run(values):
        return await answer(pipeline, values, networks)

    try:
        batched = asyncio.run(run(inputs))
        singles = [asyncio.run(run({k: v[i : i + 1] for k, v in inputs.items()})) for i in range(rows)]
    except Exception as exc:  # the user's code on its example: whatever it raises, say so
        where = "its EXAMPLE" if pipeline.example is not None else f"{rows} random rows"
        fix = "fix run()" + ("" if pipeline.example is not None else ", or declare EXAMPLE with valid rows")
        raise spec.error("source", f"fails on {where}: {type(exc).__name__}: {exc}", fix) from None
    worst = 0.0
    for tensor in pipeline.outputs:
        single = np.concatenate([s[tensor.name] for s in singles])
        if tensor.data_type == "BYTES":
            same = batched[tensor.name].tolist() == single.tolist()
        else:
            same = np.allclose(batched[tensor.name], single, rtol=RTOL, atol=ATOL)
            worst = max(worst, float(np.abs(batched[tensor.name].astype(np.float64) - single).max(initial=0.0)))
        if not same:
            raise spec.error(
                "source", f"answers {tensor.name} for a batch of rows unlike for the rows alone", "keep the rows of run() apart"
            )
    return (
        f"checked {spec.source_path.name}: {len(pipeline.networks)} network(s) ({', '.join(pipeline.networks) or 'none'}); "
        f"batched rows against single rows differ by at most {worst:.3g}"
    )
