"""The `pipeline` task: the escape hatch for custom pre- and post-processing. The spec's source is the user's Python
module (kit.pipelines.custom: NETWORKS, INPUTS, OUTPUTS and `async def run(inputs, networks)`).

A spec `NAME` becomes the entry `NAME` (kit/adapters/pipeline_model.py, the module's INPUTS and OUTPUTS) and one
model `NAME_<network>` per graph of NETWORKS, configured as the `onnx` task configures a graph (kit.control.onnx_task).
A network the spec's `networks` maps to another spec's model is that model instead, so that two pipelines share one
and their calls meet in its batcher; the entry calls its networks over BLS for the same reason, so that the network
calls of concurrent requests are batched together. docs/MODELS.md says what each key does.

`kit add`'s check runs the pipeline in this process (kit.adapters.custom_pipeline) batched and one row at a time: a
batch's rows must equal the rows run alone, since the server batches concurrent requests' rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.custom_pipeline import in_process_networks, load_definition
from kit.adapters.settings import PipelineSettings, SettingsError, keys, module_settings
from kit.control import onnx_task
from kit.control.configs import RepositoryError, config_type, example_inputs, set_parameters
from kit.control.onnx_task import ATOL, CHECK_ROWS, RTOL, bounded_batching, onnx_config
from kit.control.profiles import CANONICAL, Profile
from kit.control.served import ServedModel, adapter
from kit.control.specs import DOOR_SCHEMA, KEYS, ModelSpec, door_parameters, read_spec, readable_specs
from kit.pipelines.custom import Definition, DefinitionError, answer

MODULE = "pipeline.py"  # the module's name in the entry's version folder
IN_FLIGHT_PER_BATCH = 4  # requests under way at once, in full batches of the entry
# Requests an unbatched entry instance runs at once: their network calls meet in the networks' batchers.
UNBATCHED_IN_FLIGHT = 8
ADAPTER = adapter("pipeline_model")


@functools.lru_cache(maxsize=16)
def loaded(path: Path, modified_ns: int) -> Definition:
    """The module at `path` imported once per version of the file: the check, every profile's configs and the build's
    files all ask for it, and importing runs the user's code."""
    return load_definition(path)


def fitted_settings(spec: ModelSpec, pipeline: Definition, params: dict[str, str]) -> object:
    """The module's SETTINGS from `params` (an entry's own, or the spec's); a SpecError where they do not fit."""
    try:
        return module_settings(pipeline.settings, params)
    except SettingsError as exc:
        raise spec.error("parameters", f"do not fit the module's SETTINGS: {exc}", "set what it needs") from None


def pipeline_of(spec: ModelSpec) -> Definition:
    if spec.source_path.suffix != ".py":
        raise spec.error("source", f"names {spec.source_path.name}, not a Python module", "point it at the pipeline's .py file")
    try:
        pipeline = loaded(spec.source_path, spec.source_path.stat().st_mtime_ns)
    except DefinitionError as exc:
        raise spec.error("source", f"does not declare a pipeline: {exc}", "see docs/MODELS.md, the pipeline task") from None
    missing = [name for name in pipeline.files if not (spec.source_path.parent / name).is_file()]
    if missing:
        raise spec.error("source", f"declares FILES {missing[0]!r}, which is not a file beside it", "put it there")
    return pipeline


def network_rows(spec: ModelSpec) -> int:
    """The most rows a network of the spec takes in one call: the entry's batch cap, or, behind an unbatched entry,
    the `onnx` task's default, so that the calls of the requests in flight still meet in the network's batcher."""
    return spec.max_batch_size or KEYS["max_batch_size"].default


def network_spec(spec: ModelSpec, network: str, graph: str) -> ModelSpec:
    """The spec of one network, as the `onnx` task would read a spec of its graph (same batching and instances)."""
    source = (spec.source_path.parent / graph).resolve()
    if not source.is_file():
        raise spec.error(
            "source", f"declares the network {network!r} as {graph}, which is not a file beside it", "export it there"
        )
    name = f"{spec.name}_{network}"
    return dataclasses.replace(spec, name=name, source=str(source), route="", max_batch_size=network_rows(spec))


def network_specs(spec: ModelSpec, pipeline: Definition) -> dict[str, tuple[ModelSpec, bool]]:
    """Each network's graph spec, which kit.control.onnx_task plans, and whether the spec brings it: its own graph's,
    or the spec of the model the spec's `networks` maps it to, which the spec beside it that brings it plans."""
    shared = dict(spec.networks)
    undeclared = sorted(set(shared) - set(pipeline.networks))
    if undeclared:
        raise spec.error("networks", f"names {undeclared[0]!r}, which the module's NETWORKS lacks", "name its networks")
    beside = graph_models_beside(spec) if shared else {}
    graphs = {}
    for network, graph in pipeline.networks.items():
        if network not in shared:
            graphs[network] = network_spec(spec, network, graph), True
            continue
        if shared[network] not in beside:
            raise spec.error(
                "networks",
                f"maps {network} to {shared[network]!r}, which no spec beside it serves from a graph of its own",
                "name an onnx spec's model or another pipeline's network (NAME_network)",
            )
        graph_spec = beside[shared[network]]
        if (spec.source_path.parent / graph).is_file():  # the graph the module was checked with, where it ships one
            own = onnx_config(network_spec(spec, network, graph), routed=False)
            same_tensors(spec, network, own, onnx_config(graph_spec, routed=False))
        graphs[network] = graph_spec, False
    return graphs


def graph_models_beside(spec: ModelSpec) -> dict[str, ModelSpec]:
    """The models the other specs of the spec's folder serve from graphs of their own, by name, each with the spec of
    its graph (an `onnx` spec's own, or a pipeline's network_spec). A spec that does not read is skipped here: the
    build names its mistake."""
    found = {}
    for other in readable_specs(spec.path.parent, spec.artifacts).values():
        if other.name != spec.name and other.task == "onnx":
            found[other.name] = other
        elif other.name != spec.name and other.task == "pipeline":
            try:
                own = pipeline_of(other).networks.items()
                for network, graph in ((n, g) for n, g in own if n not in dict(other.networks)):
                    found[f"{other.name}_{network}"] = network_spec(other, network, graph)
            except RepositoryError:
                continue
    return found


def tensors(config: mc.ModelConfig) -> str:
    """A model's tensors as `name TYPE [dims], ... -> ...`, rows first where it batches."""

    def of(values) -> str:
        rows = [-1] if config.max_batch_size > 0 else []
        return ", ".join(f"{t.name} {mc.DataType.Name(t.data_type).removeprefix('TYPE_')} {rows + list(t.dims)}" for t in values)

    return f"{of(config.input)} -> {of(config.output)}"


def same_tensors(spec: ModelSpec, network: str, own: mc.ModelConfig, other: mc.ModelConfig) -> None:
    """The model a network is mapped to must have the tensors of the module's own graph (what the module was checked
    with); a SpecError that shows both where they differ."""
    if tensors(own) != tensors(other):
        raise spec.error(
            "networks",
            f"maps {network} to {other.name!r}, whose tensors ({tensors(other)}) are not those of the module's "
            f"{pipeline_of(spec).networks[network]} ({tensors(own)})",
            "map it to a model of the same graph",
        )


def door(spec: ModelSpec) -> dict[str, str]:
    """The door's parameters of the entry: its route, its answer and, for a JSON document, that document's schema."""
    params = door_parameters(spec, spec.door_answer)
    if spec.door_schema:
        try:
            params[DOOR_SCHEMA] = json.dumps(json.loads(spec.schema_path.read_text()), separators=(",", ":"))
        except json.JSONDecodeError as exc:
            raise spec.error("door_schema", f"names a file that is not JSON ({exc})", "write a JSON Schema there") from None
    return params


def entry_settings(
    spec: ModelSpec, pipeline: Definition, networks: dict[str, ServedModel], inherited: dict[str, str]
) -> PipelineSettings:
    """The entry's settings: the adapter's, and the module's own (its SETTINGS, from the spec's `parameters`, where
    it sets none the `inherited` ones of the entry `parameters_from` names)."""
    own = dict(spec.parameters)
    known = sorted(keys(pipeline.settings)) if pipeline.settings else []
    unknown = sorted(set(own) - set(known))
    if unknown:
        fix = f"its SETTINGS take {', '.join(known)}" if known else "it declares no SETTINGS"
        raise spec.error("parameters", f"holds {unknown[0]!r}, which the module does not read", fix)
    served = {n: {"model": m.name, "outputs": [o.name for o in m.config.output]} for n, m in networks.items()}
    batched = spec.max_batch_size > 0
    in_flight = IN_FLIGHT_PER_BATCH * spec.max_batch_size if batched else UNBATCHED_IN_FLIGHT
    settings = PipelineSettings(
        pipeline_module=MODULE,
        networks=json.dumps(served, separators=(",", ":")),
        max_rows=network_rows(spec),
        requests_in_flight=spec.requests_in_flight or in_flight,
        network_rows=json.dumps({n: m.config.max_batch_size for n, m in networks.items()}, separators=(",", ":")),
        parameters_from=spec.parameters_from,
    )
    try:
        return settings.with_parameters(inherited | own)
    except SettingsError as exc:
        raise spec.error("parameters", f"do not fit: {exc}", "set what the module's SETTINGS take") from None


def parameters_from(spec: ModelSpec) -> ModelSpec | None:
    """The spec of the entry `parameters_from` names, whose parameters the spec's entry takes where it sets none."""
    if not spec.parameters_from:
        return None
    path = spec.path.parent / f"{spec.parameters_from}.toml"
    if not path.is_file():
        raise spec.error("parameters_from", f"names {spec.parameters_from!r}, which no spec beside it is", "name one")
    return read_spec(path, artifacts=spec.artifacts)


def names(spec: ModelSpec) -> dict[str, str]:
    own = [network for network in pipeline_of(spec).networks if network not in dict(spec.networks)]
    return {"entry": spec.name} | {network: f"{spec.name}_{network}" for network in own}


def plan(spec: ModelSpec, profile: Profile) -> list[ServedModel]:
    """The entry, placed, and each network's model the spec brings; a network mapped to another spec's model is that
    model, which that spec brings."""
    pipeline = pipeline_of(spec)
    graphs, other = network_specs(spec, pipeline), parameters_from(spec)
    networks = {network: (onnx_task.plan(graph, profile)[0], brought) for network, (graph, brought) in graphs.items()}
    # The parameters of the entry `parameters_from` names, as its spec and the profile give them.
    placed_other = profile.placement("pipeline-entry", other.name, mc.ModelConfig()).get("parameters", {}) if other else {}
    inherited = dict(other.parameters) | {key: str(value) for key, value in placed_other.items()} if other else {}
    entry = mc.ModelConfig(name=spec.name, backend="python")
    for tensors_of, add in ((pipeline.inputs, entry.input.add), (pipeline.outputs, entry.output.add)):
        for tensor in tensors_of:
            add(name=tensor.name, data_type=config_type(tensor.data_type), dims=list(tensor.dims))
    set_parameters(entry, door(spec))
    entry.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
    if spec.max_batch_size > 0:
        bounded_batching(entry, spec)
    # An unbatched entry has no batcher, as an unbatched `onnx` model has none: Triton 2.51 stalls a model of
    # max_batch_size 0 that has a queue policy (a burst of 128 requests to a model that answers at once took 14.6-30 s,
    # up to 32 of them refused as timed out, against 0.04-0.06 s without; perf/results/unbatched_queue.json,
    # docs/RELIABILITY.md). What waits for it is bounded in front of it, by the door.
    placed = {n: model for n, (model, _) in networks.items()}
    settings = entry_settings(spec, pipeline, placed, inherited)
    files = {MODULE: spec.source_path} | {name: spec.source_path.parent / name for name in pipeline.files}
    files |= {name: spec.path_of(path) for name, path in spec.files}
    # The graphs at the module's own paths, so that the entry can run them in its process (`engines: in_process`).
    files |= {pipeline.networks[n]: model.files["model.onnx"] for n, model in placed.items()}
    entry_model = profile.place("pipeline-entry", ServedModel(spec.name, entry, settings, ADAPTER, files))
    fitted_settings(spec, pipeline, dict(entry_model.settings.module))  # inherited and placed parameters included
    if entry_model.settings.engines == "bls":  # in its own process it calls none of them
        entry_model = replace(entry_model, calls=tuple(model.name for model in placed.values()))
    return [entry_model] + [model for model, brought in networks.values() if brought]


def ready_pipeline(spec: ModelSpec) -> Definition:
    """The spec's pipeline loaded as its entry loads it, with the spec's `parameters` and the module's folder."""
    pipeline = pipeline_of(spec)
    settings = fitted_settings(spec, pipeline, dict(spec.parameters))
    try:
        return pipeline.loaded(settings, spec.source_path.parent)
    except Exception as exc:  # the user's code: whatever load raises, say so
        raise spec.error("source", f"fails to load: {type(exc).__name__}: {exc}", "fix load()") from None


def check_pipeline(spec: ModelSpec) -> str:
    """`kit add`'s check: the pipeline run in this process on random rows (or its EXAMPLE), batched and one row at a
    time; of an unbatched spec, each row as a request of its own."""
    entry = plan(spec, CANONICAL)[0].config
    pipeline = ready_pipeline(spec)
    networks = in_process_networks(pipeline, spec.source_path.parent, network_rows(spec))
    inputs = pipeline.example if pipeline.example is not None else example_inputs(entry, CHECK_ROWS)
    rows = len(next(iter(inputs.values())))
    batched_spec = spec.max_batch_size > 0

    async def run(values):
        return await answer(pipeline, values, networks, batched_spec)

    try:
        if not batched_spec:
            for i in range(rows):
                asyncio.run(run({k: v[i] for k, v in inputs.items()}))
            return f"checked {spec.source_path.name}: {rows} requests answered as OUTPUTS says"
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
