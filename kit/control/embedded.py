"""The embedded server's two targets: the tritonserver of the nvidia-pytriton wheel on a CPU host (`cpu`, the default
of `make serve`) and on a GPU host (`gpu-embedded`), with no container. That server has no ONNX Runtime or TensorRT
backend, so a graph (an `onnxruntime` model) moves onto one of the kit's Python-backend runners; Python models (entries,
pre- and post-processing) stay on `KIND_CPU` instances: they hold no weights. One applier, `place`, for both; what
differs is which runners and keys each target takes.

`cpu`: the ONNX runner on ONNX Runtime's CPU provider, `threads` intra-op threads per instance, serving the version
folder's `graph` (default model.onnx; a text export writes faster CPU graphs beside it). On CPU, instances x threads
is the layout knob: batching buys little.

`gpu-embedded`: the runner a graph's `runner` names: "onnx" (the default), the ONNX file on ONNX Runtime's
`provider`, on `KIND_GPU` instances on `gpus` for a CUDA or TensorRT provider; "torch", the PyTorch checkpoint the
export saved beside it (`checkpoint/`) on `KIND_GPU` instances on each GPU in `gpus`, in fp16 unless set, its keys
TorchRunnerSettings' (`"device": "cpu"`: the CPU rehearsal of a GPU run); "custom", a runner of the profile's own,
`model_py`, its `parameters` its own (the benchmarks' simulated accelerator). The torch runner's `merge: "measured"`
is its merge_measured (`null` turns a profile's off). Every runner takes its inputs in CPU memory
(FORCE_CPU_ONLY_INPUT_TENSORS) and moves them itself; `instances` counts per GPU for a GPU placement. A profile's
`parameters` set fields of the model's typed settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import OnnxRunnerSettings, SettingsError, TorchRunnerSettings
from kit.control.configs import RepositoryError, copy_config, set_parameter, set_parameters
from kit.control.placement import COMMON, apply_common, apply_ensemble, check_keys
from kit.control.served import ServedModel, adapter

RUNNER_KEYS = {
    "torch": frozenset(
        {"gpus", "device", "dtype", "batch_ladder", "warm_up", "cuda_graphs", "graph_memory_share", "profile_executions"}
    ),
    "onnx": frozenset({"gpus", "threads", "provider"}),
    "custom": frozenset({"model_py"}),
}
KEYS = {
    "cpu": COMMON | {"threads", "graph"},
    "gpu-embedded": COMMON | {"runner", "merge"} | frozenset().union(*RUNNER_KEYS.values()),
}
CHECKPOINT = "checkpoint"
CPU_PROVIDER = "CPUExecutionProvider"
MEASURED = "measured"


def default_ladder(max_batch_size: int) -> list[int]:
    """The powers of two below a model's batch cap, and the cap: at most log2(cap) + 1 shapes per length."""
    if max_batch_size < 1:  # an unbatched model runs its requests whole
        return []
    return [2**k for k in range(max_batch_size.bit_length()) if 2**k < max_batch_size] + [max_batch_size]


def torch_runner(config: mc.ModelConfig, placement: dict, lengths: Sequence[int]) -> TorchRunnerSettings:
    device = placement.get("device", "cuda")  # TorchRunnerSettings refuses one it does not know
    if device == "cpu" and "gpus" in placement:
        raise RepositoryError(f"{config.name}: `gpus` places GPU instances, but device cpu runs on the CPU")
    keys = ("dtype", "warm_up", "cuda_graphs", "graph_memory_share", "profile_executions")
    given = {key: placement[key] for key in keys if key in placement}
    runner = TorchRunnerSettings(torch_model=CHECKPOINT, device=device, warm_lengths=tuple(lengths))
    return runner.with_parameters({"dtype": "fp16", "cuda_graphs": device == "cuda"} | given)


def onnx_runner(config: mc.ModelConfig, placement: dict) -> OnnxRunnerSettings:
    """The ONNX runner: on the CPU, of the version folder's `graph` (a cpu placement's key); on a GPU, of model.onnx."""
    provider = placement.get("provider", CPU_PROVIDER)
    if provider == CPU_PROVIDER and "gpus" in placement:
        raise RepositoryError(f"{config.name}: `gpus` places GPU instances, but provider {provider} runs on the CPU")
    graph, threads = placement.get("graph", "model.onnx"), int(placement.get("threads", 1))
    return OnnxRunnerSettings(onnx_model=graph, intra_op_threads=threads, provider=provider)


def merged(config: mc.ModelConfig, runner: object, merge: object) -> TorchRunnerSettings:
    """The torch runner's settings with its runs priced by its own warm-up."""
    if merge != MEASURED:
        raise RepositoryError(
            f'{config.name}: merge is "{MEASURED}" (the runner\'s warm-up prices its runs) or null, not {merge!r}'
        )
    if not isinstance(runner, TorchRunnerSettings):
        raise RepositoryError(
            f'{config.name}: merge "{MEASURED}" prices runs by the torch runner\'s warm-up, which this runner has not'
        )
    return replace(runner, merge_measured=True)


def graph_runner(config: mc.ModelConfig, placement: dict, target: str, lengths: Sequence[int]):
    """A graph's runner on `target`: its settings, its model.py, and whether it runs on a GPU."""
    if target == "cpu":
        return onnx_runner(config, placement), "onnx", False
    name = placement.get("runner", "onnx")
    if name not in RUNNER_KEYS:
        raise RepositoryError(f"{config.name}: unknown runner {name!r} (known: {sorted(RUNNER_KEYS)})")
    foreign = set(placement) - COMMON - RUNNER_KEYS[name] - {"runner", "merge"}
    if foreign:
        raise RepositoryError(f"{config.name}: {sorted(foreign)} do not apply to the {name} runner")
    try:
        if name == "torch":
            runner = torch_runner(config, placement, lengths)
            on_gpu = runner.device == "cuda"
        elif name == "onnx":
            runner = onnx_runner(config, placement)
            on_gpu = runner.provider != CPU_PROVIDER
        else:
            runner, on_gpu = None, False
        if placement.get("merge") is not None:  # null: a variant that turns a profile's merge off
            runner = merged(config, runner, placement["merge"])
    except SettingsError as exc:
        raise RepositoryError(f"{config.name}: {exc}") from None
    set_parameter(config, "FORCE_CPU_ONLY_INPUT_TENSORS", "yes")
    return runner, name, on_gpu


def place(model: ServedModel, placement: dict, target: str, lengths: Sequence[int] = ()) -> ServedModel:
    """`model` placed on the embedded server of `target` (cpu or gpu-embedded); `lengths`: the lengths its callers pad
    its free axis to (a text graph's buckets), which a runner that warms up runs."""
    config = model.config
    if config.platform == "ensemble":
        return replace(model, config=apply_ensemble(config, placement), settings=with_parameters(model, placement))
    check_keys(config, placement, KEYS[target], target)
    config = copy_config(config)
    settings, model_py, on_gpu = model.settings, model.adapter, False
    if config.backend == "onnxruntime":
        config.backend = "python"
        settings, runner, on_gpu = graph_runner(config, placement, target, lengths)
        model_py = Path(placement["model_py"]) if runner == "custom" else adapter(f"{runner}_runner_model")
        if runner == "custom":  # its parameters are its own, as its model.py reads them
            set_parameters(config, placement.get("parameters", {}))
            placement = {key: value for key, value in placement.items() if key != "parameters"}
        served = getattr(settings, "onnx_model", None) or getattr(settings, "torch_model", None)
        if served is not None and served not in model.files:
            raise RepositoryError(f"{config.name} serves {served}, which the export did not write; run `make export`")
    elif config.backend != "python":
        raise RepositoryError(f"{config.name}: no embedded placement for backend {config.backend!r}")
    elif set(placement) - COMMON:
        raise RepositoryError(
            f"{config.name}: {sorted(set(placement) - COMMON)} are for ONNX models on a runner, not a Python model"
        )
    del config.instance_group[:]
    kind = mc.ModelInstanceGroup.KIND_GPU if on_gpu else mc.ModelInstanceGroup.KIND_CPU
    group = config.instance_group.add(kind=kind, count=int(placement.get("instances", 1)))
    if on_gpu:
        group.gpus[:] = [int(g) for g in placement.get("gpus", [0])]
    apply_common(config, placement)
    if isinstance(settings, TorchRunnerSettings):  # after the batch cap: the ladder reaches it
        ladder = placement.get("batch_ladder", default_ladder(config.max_batch_size))
        if any(not 1 <= int(size) <= config.max_batch_size for size in ladder):
            cap = config.max_batch_size
            raise RepositoryError(f"{config.name}: batch_ladder {ladder} goes outside 1 .. max_batch_size {cap}")
        try:
            settings = replace(settings, batch_ladder=tuple(int(size) for size in ladder))
        except SettingsError as exc:
            raise RepositoryError(f"{config.name}: {exc}") from None
    placed = replace(model, config=config, adapter=model_py, settings=settings)
    return replace(placed, settings=with_parameters(placed, placement)).with_files(placement.get("files", {}))


def with_parameters(model: ServedModel, placement: dict):
    """The model's settings with the fields the placement's `parameters` set."""
    parameters = placement.get("parameters", {})
    if not parameters:
        return model.settings
    if model.settings is None:
        raise RepositoryError(f"{model.name}: `parameters` {sorted(parameters)} set settings, and it has none")
    try:
        return model.settings.with_parameters(parameters)
    except SettingsError as exc:
        raise RepositoryError(f"{model.name}: {exc}") from None
