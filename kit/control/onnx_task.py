"""The `onnx` task: a user's ONNX graph served as it is, its tensors read from the graph itself.

The config is what Triton's autocomplete would infer, done by the kit at build time so that it can be
checked and written through Triton's schema: each graph input and output becomes a tensor of its
name, data type and dims; with batching on (max_batch_size > 0) the first axis of every tensor must
be dynamic and is the batch axis. `check_graph` is what `kit add` runs before it writes a spec: the
graph loads in ONNX Runtime, answers a batch, and each row of a batch equals that row run alone (a
graph whose rows mix, as a training-mode batch norm would, cannot be batched across requests).
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import np_to_triton_dtype

from kit.control.configs import config_type, example_inputs, set_parameter, set_parameters
from kit.control.profiles import Profile
from kit.control.served import ServedModel
from kit.control.specs import DOOR_AXES, ModelSpec, door_parameters
from kit.runners.onnx import make_session

GRAPH = "model.onnx"  # the name the graph takes in its version folder: the ONNX runner's default
CHECK_ROWS = 3
RTOL, ATOL = 1e-4, 1e-5  # batched against single rows: the same kernels may sum in another order
QUEUE_PER_BATCH = 4  # a model's queue holds this many full batches before it refuses


def tensor_type(spec: ModelSpec, value: onnx.ValueInfoProto) -> tuple[int, list[int]]:
    """A graph tensor's Triton data type and dims (-1 for a dynamic axis)."""
    kind = value.type.tensor_type
    if not value.type.HasField("tensor_type"):
        raise spec.error("source", f"has {value.name!r}, which is not a tensor", "the onnx task serves graphs of tensors")
    wire = np_to_triton_dtype(helper.tensor_dtype_to_np_dtype(kind.elem_type))
    if wire is None:
        raise spec.error("source", f"has {value.name!r} of an ONNX type Triton does not carry", "cast it in the graph")
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in kind.shape.dim]
    return config_type(wire), dims


@dataclass(frozen=True)
class GraphFacts:
    """What the kit reads of a graph: its inputs (initializers listed as inputs left out), its outputs, and the files
    its external weights name."""

    inputs: tuple[onnx.ValueInfoProto, ...]
    outputs: tuple[onnx.ValueInfoProto, ...]
    external: tuple[str, ...]


@functools.lru_cache(maxsize=16)
def read_facts(path: Path, modified_ns: int) -> GraphFacts:
    """The graph at `path` read once per version of the file (the spec check, the build and its files all ask),
    without its weights; copies, so that the graph itself is not kept."""
    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {w.name for w in graph.initializer}

    def copied(values) -> tuple[onnx.ValueInfoProto, ...]:
        return tuple(onnx.ValueInfoProto.FromString(v.SerializeToString()) for v in values)

    external = [
        next(entry.value for entry in w.external_data if entry.key == "location")
        for w in graph.initializer
        if w.data_location == onnx.TensorProto.EXTERNAL
    ]
    return GraphFacts(copied(i for i in graph.input if i.name not in weights), copied(graph.output), tuple(external))


def graph_facts(spec: ModelSpec) -> GraphFacts:
    if spec.shipped and not spec.source_path.is_file():
        raise spec.error("source", f"names {spec.source_path}, which the export did not write", "run `make export` first")
    try:
        return read_facts(spec.source_path, spec.source_path.stat().st_mtime_ns)
    except Exception as exc:  # onnx raises protobuf's DecodeError and its own errors alike
        raise spec.error("source", f"is not an ONNX graph ({exc})", "point it at a .onnx file") from None


def onnx_config(spec: ModelSpec, routed: bool = True) -> mc.ModelConfig:
    """The canonical (GPU-native, onnxruntime backend) config of the spec's graph; `routed`: the door serves it (its
    route and shared axes as parameters), as it does a spec's graph unless the spec says `door = false`, but not a
    network behind a pipeline's entry."""
    config = mc.ModelConfig(name=spec.name, backend="onnxruntime", max_batch_size=spec.max_batch_size)
    facts = graph_facts(spec)
    inputs, outputs = facts.inputs, facts.outputs
    for values, add in ((inputs, config.input.add), (outputs, config.output.add)):
        for value in values:
            data_type, dims = tensor_type(spec, value)
            if spec.max_batch_size > 0:
                if not dims or dims[0] != -1:
                    raise spec.error(
                        "max_batch_size",
                        f"is {spec.max_batch_size}, but the graph's {value.name!r} has no dynamic first axis ({dims})",
                        "export the graph with a dynamic batch axis, or set max_batch_size = 0 to serve it unbatched",
                    )
                dims = dims[1:]
            tensor = add(name=value.name, data_type=data_type, dims=dims or [1])
            if not dims:  # one value per row: Triton's dims cannot be empty, so [1] reshaped to the graph's []
                tensor.reshape.SetInParent()
    config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_GPU, count=spec.instances)
    if routed and spec.door:
        set_parameters(config, door_parameters(spec))
        axes = shared_axes(inputs, spec.max_batch_size > 0)
        if axes:
            set_parameter(config, DOOR_AXES, json.dumps(axes, separators=(",", ":")))
    if spec.max_batch_size > 0:
        bounded_batching(config, spec)
    return config


def bounded_batching(config: mc.ModelConfig, spec: ModelSpec) -> None:
    """The spec's batch cap, queue delay and preferred sizes on a model that batches requests, with a bounded queue
    that refuses past the spec's `max_queue_size` (QUEUE_PER_BATCH full batches unless it says) or its queue
    timeout."""
    config.max_batch_size = spec.max_batch_size
    batching = config.dynamic_batching
    batching.max_queue_delay_microseconds = spec.max_queue_delay_microseconds
    batching.preferred_batch_size[:] = spec.preferred_batch_size
    policy = batching.default_queue_policy
    policy.timeout_action = mc.ModelQueuePolicy.REJECT
    policy.default_timeout_microseconds = int(spec.queue_timeout_seconds * 1e6)
    policy.allow_timeout_override = True
    policy.max_queue_size = spec.max_queue_size or QUEUE_PER_BATCH * spec.max_batch_size


def shared_axes(inputs: Sequence[onnx.ValueInfoProto], batched: bool) -> dict[str, list[str]]:
    """Each input's non-batch axes by the graph's symbolic name ("" for a fixed or unnamed one), where two inputs
    share a name: the graph needs those axes alike in length."""
    names = {i.name: [d.dim_param for d in i.type.tensor_type.shape.dim][batched:] for i in inputs}
    counts = Counter(name for axes in names.values() for name in set(axes) if name)
    shared = {name for name, count in counts.items() if count > 1}
    return {i: [a if a in shared else "" for a in axes] for i, axes in names.items() if shared & set(axes)}


def check_graph(spec: ModelSpec) -> float:
    """Runs the graph on random rows, batched and one by one; the largest difference between the two."""
    config = onnx_config(spec)
    try:
        session = make_session(spec.source_path, threads=1)
        outputs = [o.name for o in config.output]
        inputs = example_inputs(config, CHECK_ROWS)
        batched = session.run(outputs, inputs)
        if config.max_batch_size == 0:
            return 0.0
        singles = [session.run(outputs, {k: v[i : i + 1] for k, v in inputs.items()}) for i in range(CHECK_ROWS)]
    except Exception as exc:  # onnxruntime's own errors: a graph it cannot load or run
        raise spec.error("source", f"does not run in ONNX Runtime on random inputs ({exc})", "check the graph") from None
    worst = 0.0
    for k, name in enumerate(outputs):
        if batched[k].shape[0] != CHECK_ROWS:
            raise spec.error(
                "source", f"answers {name} with {batched[k].shape[0]} rows for {CHECK_ROWS}", "keep axis 0 the batch"
            )
        single = np.concatenate([s[k] for s in singles])
        if not np.allclose(batched[k], single, rtol=RTOL, atol=ATOL):
            raise spec.error(
                "max_batch_size",
                f"batches rows that change each other's {name} (max difference {np.abs(batched[k] - single).max():.3g})",
                "set max_batch_size = 0, or export the graph in inference mode",
            )
        if np.issubdtype(batched[k].dtype, np.number):
            worst = max(worst, float(np.abs(batched[k].astype(np.float64) - single).max(initial=0.0)))
    return worst


def graph_files(spec: ModelSpec) -> dict[str, Path]:
    """What the version folder links: the graph as model.onnx, and the files its external weights name."""
    return {GRAPH: spec.source_path} | {name: spec.source_path.parent / name for name in graph_facts(spec).external}


def names(spec: ModelSpec) -> dict[str, str]:
    return {"graph": spec.name}


def plan(spec: ModelSpec, profile: Profile) -> list[ServedModel]:
    """The spec's graph, placed with the instances the spec gives: an `onnx` spec's as an `onnx-graph`, or a
    pipeline's network (kit.control.pipeline_task.network_spec) as a `pipeline-network`, with no door route (a network
    is its entry's to call)."""
    own = spec.task == "onnx"
    model = ServedModel(spec.name, onnx_config(spec, routed=own), files=graph_files(spec))
    return [profile.place("onnx-graph" if own else "pipeline-network", model, {"instances": spec.instances})]


def check(spec: ModelSpec) -> str:
    """`kit add`'s check: batched rows against single rows."""
    return f"checked {spec.source_path}: batched rows against single rows differ by at most {check_graph(spec):.3g}"
