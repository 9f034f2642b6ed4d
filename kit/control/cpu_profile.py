"""The CPU placement of the model repository (the embedded server from the nvidia-pytriton wheel).

That server has no onnxruntime backend, so `onnxruntime` models move to the kit's Python-backend
ONNX Runtime runner (kit/adapters/onnx_runner_model.py) with their thread count. Settings:
`threads` (ONNX Runtime intra-op threads of a runner instance), `graph` (the ONNX file of the
version folder the runner serves, default model.onnx; RADAR's export writes faster CPU graphs
beside it, export.text_model) and the common ones (kit.control.profiles). On CPU, instances x threads
is the layout knob: batching buys little.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import RepositoryError, copy_config, set_parameter
from kit.control.profiles import COMMON, apply_common, check_keys

SETTINGS = COMMON | {"threads", "graph"}
DEFAULT_GRAPH = "model.onnx"


def apply_cpu_profile(config: mc.ModelConfig, settings: dict) -> mc.ModelConfig:
    """CPU placement for one model: a modified copy of its canonical config."""
    check_keys(config, settings, SETTINGS, "CPU")
    config = copy_config(config)
    for key in {"threads", "graph"} & set(settings):
        if config.backend != "onnxruntime":
            raise RepositoryError(f"{config.name}: `{key}` is for ONNX models on the runner, not backend {config.backend!r}")
    if config.backend == "onnxruntime":
        config.backend = "python"
        set_parameter(config, "onnx_model", settings.get("graph", DEFAULT_GRAPH))
        set_parameter(config, "intra_op_threads", settings.get("threads", 1))
    del config.instance_group[:]
    config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=int(settings.get("instances", 1)))
    apply_common(config, settings)
    return config
