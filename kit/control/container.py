"""The `gpu` target: the model repository placed for the official Triton container, derived by backend.

The same canonical configs as the embedded targets', changed by code only, never by model name:

- `onnxruntime` models stay on Triton's native ONNX Runtime backend, on `KIND_GPU` instances on every
  GPU listed in `gpus`, with the TensorRT execution accelerator (engines cached under
  `TRT_CACHE_ROOT`, a volume, so a restart does not rebuild them). With `"engine": "tensorrt_plan"`
  they become TensorRT-backend models serving `model.plan` built by `export.tensorrt` instead.
- `python` models (entry models, BLS, pre/post-processing) stay on `KIND_CPU`: they hold no weights.

CUDA graphs apply only to `tensorrt_plan` models: Triton's `optimization.cuda.graphs` is recognised
by the TensorRT backend alone, and ONNX Runtime's `trt_cuda_graph_enable` needs static input shapes,
which dynamic batching never gives (every batch size is a new shape). Python models have none.

Its keys in `model_repository/profiles/gpu.json`, by role or by model, are listed in docs/MODELS.md (A profile's keys).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import RepositoryError, copy_config
from kit.control.embedded import with_parameters
from kit.control.placement import COMMON, apply_common, apply_ensemble, check_keys
from kit.control.served import ServedModel

# Where the container keeps ONNX Runtime's TensorRT engine cache (a volume in docker-compose.yml).
TRT_CACHE_ROOT = "/trt-cache"
# Each Python-model instance has its own /dev/shm region; docs/GPU.md gives the measurement this bound covers.
PYTHON_SHM_PER_INSTANCE = 64 * 2**20
DEFAULT_WORKSPACE_BYTES = 2 * 2**30
SETTINGS = COMMON | {
    "gpus",
    "accelerator",
    "precision",
    "max_workspace_size_bytes",
    "shapes",
    "opt_batch",
    "engine",
    "cuda_graphs",
}


def shape_profiles(config: mc.ModelConfig, settings: dict) -> list[dict[str, tuple[list[int], ...]]]:
    """TensorRT optimisation profiles as {input: (min, opt, max)} full shapes, batch dimension first.

    Inputs with only fixed dims need no `shapes` (one profile over the batch sizes); inputs with
    dynamic dims and no `shapes` give no profile (ONNX Runtime then sizes engines as shapes arrive).
    """
    profiles = settings.get("shapes")
    if profiles is None:
        if any(d < 0 for i in config.input for d in i.dims):
            return []
        profiles = [{}]
    preferred = max(config.dynamic_batching.preferred_batch_size, default=config.max_batch_size)
    batch = (1, int(settings.get("opt_batch", preferred)), config.max_batch_size) if config.max_batch_size > 0 else None
    result = []
    for number, profile in enumerate(profiles):
        shapes = {}
        for tensor in config.input:
            triple = []
            for k, point in enumerate(("min", "opt", "max")):
                dims = list(profile.get(point, {}).get(tensor.name, tensor.dims))
                where = f"{config.name}: shapes[{number}].{point}"
                if len(dims) != len(tensor.dims) or any(t >= 0 and d != t for d, t in zip(dims, tensor.dims)):
                    raise RepositoryError(f"{where}.{tensor.name} {dims} does not fit dims {list(tensor.dims)}")
                if any(d < 1 for d in dims):
                    raise RepositoryError(f"{where} needs a size for every dynamic dim of {tensor.name}")
                triple.append(([batch[k]] if batch else []) + dims)
            shapes[tensor.name] = tuple(triple)
        result.append(shapes)
    return result


def trt_shape_string(profile: dict[str, tuple[list[int], ...]], point: int) -> str:
    """One point (0 min, 1 opt, 2 max) of a profile in trtexec / ONNX Runtime syntax: `a:1x48,b:1x48`."""
    return ",".join(f"{name}:{'x'.join(map(str, dims[point]))}" for name, dims in profile.items())


def _onnxruntime_tensorrt(config: mc.ModelConfig, settings: dict) -> None:
    profiles = shape_profiles(config, settings)
    if len(profiles) > 1:
        raise RepositoryError(f"{config.name}: ONNX Runtime's TensorRT provider takes one shape profile (a plan: several)")
    accelerator = config.optimization.execution_accelerators.gpu_execution_accelerator.add(name="tensorrt")
    parameters = {
        "precision_mode": settings.get("precision", "FP32"),
        "max_workspace_size_bytes": settings.get("max_workspace_size_bytes", DEFAULT_WORKSPACE_BYTES),
        "trt_engine_cache_enable": "1",
        "trt_engine_cache_path": f"{TRT_CACHE_ROOT}/{config.name}",
    }
    if profiles:
        keys = ("trt_profile_min_shapes", "trt_profile_opt_shapes", "trt_profile_max_shapes")
        parameters.update((key, trt_shape_string(profiles[0], point)) for point, key in enumerate(keys))
    for key, value in parameters.items():
        accelerator.parameters[key] = str(value)


def _tensorrt_plan(config: mc.ModelConfig, settings: dict) -> None:
    if not shape_profiles(config, settings):
        raise RepositoryError(f"{config.name}: a TensorRT engine needs `shapes` for its dynamic dims")
    config.backend = "tensorrt"
    config.platform = "tensorrt_plan"
    config.default_model_filename = "model.plan"
    if "cuda_graphs" in settings:
        json_format.ParseDict({"graphs": True, "graph_spec": settings["cuda_graphs"]}, config.optimization.cuda)


def place(model: ServedModel, settings: dict, target: str = "gpu", lengths: Sequence[int] = ()) -> ServedModel:
    """`model` placed in the container: a graph on Triton's own backends, a Python model on CPU instances."""
    config = model.config
    if config.platform == "ensemble":
        return replace(model, config=apply_ensemble(config, settings), settings=with_parameters(model, settings))
    check_keys(config, settings, SETTINGS, "GPU")
    config = copy_config(config)
    apply_common(config, settings)  # first: TensorRT's opt batch follows the preferred batch sizes
    del config.instance_group[:]
    instances = int(settings.get("instances", 1))
    if config.backend == "python":
        config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=instances)
    elif config.backend == "onnxruntime":
        engine = settings.get("engine", "onnxruntime")
        if engine != "tensorrt_plan" and "cuda_graphs" in settings:
            raise RepositoryError(f"{config.name}: CUDA graphs apply only to engine tensorrt_plan (see kit/control/container.py)")
        if engine == "tensorrt_plan":
            _tensorrt_plan(config, settings)
        elif engine != "onnxruntime":
            raise RepositoryError(f"{config.name}: unknown engine {engine!r} (onnxruntime or tensorrt_plan)")
        elif settings.get("accelerator", "tensorrt") == "tensorrt":
            _onnxruntime_tensorrt(config, settings)
        elif settings["accelerator"] != "cuda":
            raise RepositoryError(f"{config.name}: unknown accelerator {settings['accelerator']!r} (tensorrt or cuda)")
        group = config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_GPU, count=instances)
        group.gpus[:] = [int(g) for g in settings.get("gpus", [0])]
        if engine == "tensorrt_plan" and len(settings.get("shapes", [])) > 1:
            group.profile[:] = [str(i) for i in range(len(settings["shapes"]))]  # Triton picks by input shape
        config.optimization.input_pinned_memory.enable = True
        config.optimization.output_pinned_memory.enable = True
    else:
        raise RepositoryError(f"{config.name}: no GPU placement for backend {config.backend!r}")
    placed = replace(model, config=config)
    return replace(placed, settings=with_parameters(placed, settings)).with_files(settings.get("files", {}))


def python_shm_bytes(configs: dict[str, mc.ModelConfig]) -> int:
    """The /dev/shm a server needs for its Python-backend instances (what docker and k8s must give)."""
    instances = sum(g.count for c in configs.values() if c.backend == "python" for g in c.instance_group)
    return instances * PYTHON_SHM_PER_INSTANCE
