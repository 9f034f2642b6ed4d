"""The embedded server on a GPU host (`--profile gpu-embedded`): the tritonserver from the nvidia-pytriton
wheel, a GPU build with no container and no native ONNX Runtime or TensorRT backend.

Derived by backend from the same sources as the other profiles, never by model name:

- `onnxruntime` models become Python-backend models on one of the kit's runners, by `runner`:
  "torch": the PyTorch checkpoint the export saved beside the ONNX file (`checkpoint/`, linked by
  artifacts.json), on `KIND_GPU` instances on each GPU in `gpus`, in `dtype` (fp16 unless set);
  its runs padded up to `batch_ladder` (default: the powers of two up to the placed max_batch_size, and it),
  every shape of it warmed at load unless `warm_up` is false, each captured as a CUDA graph unless
  `cuda_graphs` is false, within `graph_memory_share` of the free memory, and `profile_executions`
  executions traced (kit.runners.torch); `"device": "cpu"` runs it on `KIND_CPU` instances instead,
  without graphs (the CPU rehearsal of a GPU run, or a host whose GPU is taken);
  "onnx" (the default): the ONNX file with `threads` on ONNX Runtime's `provider`, on `KIND_CPU`
  instances for the CPU provider (the default) and on `KIND_GPU` ones on `gpus` for the CUDA or
  TensorRT provider (onnxruntime-gpu).
  "sim": a simulated accelerator (kit.runners.simulated) on `KIND_CPU` instances: no weights, each batch
  answered after the time the device `table` (model_repository/devices/<table>.json) gives for its `curve`
  (the table's model) at `precision`: the GPU's regime for the serving path, on a machine without one.
  Every runner takes its inputs in CPU memory (FORCE_CPU_ONLY_INPUT_TENSORS) and moves them itself.
- `python` models (entry models, pre/post-processing) stay on `KIND_CPU`: they hold no weights.

Settings: `runner`, `gpus` (default [0]), `device`, `dtype`, `batch_ladder`, `warm_up`, `cuda_graphs`,
`graph_memory_share`, `profile_executions`, `threads`, `provider`, `table`, `curve`, `precision`, `merge` (how requests
of different shapes run as one padded batch where that is cheaper, kit/adapters/runner.py: any runner's
`{"table": ..., "curve": ...}`, a device table that prices a run, or the torch runner's `"measured"`, the times of its
own warm-up), and the common ones of
kit.control.profiles; `instances` counts per GPU for a GPU placement. The values
of the runner settings are checked by their typed settings (kit.adapters.settings) at build.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import RepositoryError, copy_config, parameters, set_parameter
from kit.control.profiles import COMMON, apply_common, check_keys

RUNNER_KEYS = {
    "torch": frozenset(
        {"gpus", "device", "dtype", "batch_ladder", "warm_up", "cuda_graphs", "graph_memory_share", "profile_executions"}
    ),
    "onnx": frozenset({"gpus", "threads", "provider"}),
    "sim": frozenset({"table", "curve", "precision"}),
}
TORCH_DEVICES = ("cuda", "cpu")
SETTINGS = COMMON | {"runner", "merge"} | frozenset().union(*RUNNER_KEYS.values())
MERGE_KEYS = frozenset({"table", "curve", "precision"})
CHECKPOINT = "checkpoint"
CPU_PROVIDER = "CPUExecutionProvider"
MEASURED = "measured"


def _torch_runner(config: mc.ModelConfig, settings: dict) -> bool:
    """Sets the PyTorch runner's parameters; True when it runs on a GPU (unless `device` is "cpu")."""
    device = settings.get("device", "cuda")
    if device not in TORCH_DEVICES:
        raise RepositoryError(f"{config.name}: device {device!r} is not one of {', '.join(TORCH_DEVICES)}")
    if device == "cpu" and "gpus" in settings:
        raise RepositoryError(f"{config.name}: `gpus` places GPU instances, but device cpu runs on the CPU")
    if device == "cpu" and settings.get("cuda_graphs"):
        raise RepositoryError(f"{config.name}: cuda_graphs needs device cuda")
    set_parameter(config, "torch_model", CHECKPOINT)
    set_parameter(config, "dtype", settings.get("dtype", "fp16"))
    set_parameter(config, "device", device)
    set_parameter(config, "warm_up", str(settings.get("warm_up", True)).lower())
    set_parameter(config, "cuda_graphs", str(settings.get("cuda_graphs", device == "cuda")).lower())
    for key in ("graph_memory_share", "profile_executions"):
        if key in settings:
            set_parameter(config, key, settings[key])
    return device == "cuda"


def default_ladder(max_batch_size: int) -> list[int]:
    """The powers of two below a model's batch cap, and the cap: at most log2(cap) + 1 shapes per length."""
    if max_batch_size < 1:  # an unbatched model runs its requests whole
        return []
    return [2**k for k in range(max_batch_size.bit_length()) if 2**k < max_batch_size] + [max_batch_size]


def _onnx_runner(config: mc.ModelConfig, settings: dict) -> bool:
    """Sets the ONNX runner's parameters; True when its provider runs on a GPU."""
    provider = settings.get("provider", CPU_PROVIDER)
    if provider == CPU_PROVIDER and "gpus" in settings:
        raise RepositoryError(f"{config.name}: `gpus` places GPU instances, but provider {provider} runs on the CPU")
    set_parameter(config, "onnx_model", "model.onnx")
    set_parameter(config, "intra_op_threads", settings.get("threads", 1))
    set_parameter(config, "provider", provider)
    return provider != CPU_PROVIDER


def _sim_runner(config: mc.ModelConfig, settings: dict) -> bool:
    """Sets the simulated accelerator's parameters (kit.runners.simulated); False: it runs on the CPU, sleeping."""
    for key in ("table", "curve"):
        if key not in settings:
            raise RepositoryError(f"{config.name}: the sim runner needs `{key}` (a table of model_repository/devices, its model)")
    set_parameter(config, "sim_table", f"{settings['table']}.json")
    set_parameter(config, "curve", settings["curve"])
    set_parameter(config, "precision", settings.get("precision", "fp16"))
    return False


RUNNERS = {"torch": _torch_runner, "onnx": _onnx_runner, "sim": _sim_runner}


def _merge(config: mc.ModelConfig, merge: object, precision: str) -> None:
    """Sets the runner's cost of a run (kit/adapters/runner.py): a device table, its model's rows and a precision
    (the runner's own unless given)."""
    if not isinstance(merge, dict) or set(merge) - MERGE_KEYS or not {"table", "curve"} <= set(merge):
        raise RepositoryError(
            f'{config.name}: merge takes {{"table": a table of model_repository/devices, "curve": its model, '
            f'"precision": optional}}, not {merge!r}'
        )
    set_parameter(config, "merge_table", f"{merge['table']}.json")
    set_parameter(config, "merge_curve", merge["curve"])
    set_parameter(config, "merge_precision", merge.get("precision", precision))


def apply_gpu_embedded_profile(config: mc.ModelConfig, settings: dict) -> mc.ModelConfig:
    """The embedded GPU placement for one model: a modified copy of its canonical config."""
    check_keys(config, settings, SETTINGS, "gpu-embedded")
    config = copy_config(config)
    own = set(settings) - COMMON
    if config.backend == "python":
        if own:
            raise RepositoryError(f"{config.name}: {sorted(own)} are for ONNX models on a runner, not a Python model")
        on_gpu = False
    elif config.backend == "onnxruntime":
        runner = settings.get("runner", "onnx")
        if runner not in RUNNERS:
            raise RepositoryError(f"{config.name}: unknown runner {runner!r} (known: {sorted(RUNNERS)})")
        foreign = own - RUNNER_KEYS[runner] - {"runner", "merge"}
        if foreign:
            raise RepositoryError(f"{config.name}: {sorted(foreign)} do not apply to the {runner} runner")
        config.backend = "python"
        on_gpu = RUNNERS[runner](config, settings)
        if settings.get("merge") == MEASURED:
            if runner != "torch":
                raise RepositoryError(f'{config.name}: merge "{MEASURED}" prices runs by the torch runner\'s warm-up')
            set_parameter(config, "merge_measured", "true")
        elif settings.get("merge") is not None:  # null: a variant that turns a profile's merge off
            runner_set = parameters(config)  # the precision the runner was just given: the sim's, the torch dtype
            _merge(config, settings["merge"], runner_set.get("precision") or runner_set.get("dtype") or "fp32")
        set_parameter(config, "FORCE_CPU_ONLY_INPUT_TENSORS", "yes")
    else:
        raise RepositoryError(f"{config.name}: no embedded GPU placement for backend {config.backend!r}")
    del config.instance_group[:]
    kind = mc.ModelInstanceGroup.KIND_GPU if on_gpu else mc.ModelInstanceGroup.KIND_CPU
    group = config.instance_group.add(kind=kind, count=int(settings.get("instances", 1)))
    if on_gpu:
        group.gpus[:] = [int(g) for g in settings.get("gpus", [0])]
    apply_common(config, settings)
    if "torch_model" in config.parameters:  # after the batch cap: the ladder reaches it
        ladder = settings.get("batch_ladder", default_ladder(config.max_batch_size))
        if any(not 1 <= int(size) <= config.max_batch_size for size in ladder):
            cap = config.max_batch_size
            raise RepositoryError(f"{config.name}: batch_ladder {ladder} goes outside 1 .. max_batch_size {cap}")
        set_parameter(config, "batch_ladder", ",".join(str(int(size)) for size in ladder))
    return config
