"""Triton Python-backend model for an ONNX model (installed as `model.py` by kit.control.repository).

ONNX Runtime's CPU provider by default; with a GPU `provider` (onnxruntime-gpu), on the GPU Triton
placed this instance on.
"""

from kit.adapters.runner import RunnerModel
from kit.adapters.settings import OnnxRunnerSettings
from kit.runners.onnx import BAD_INPUT, OnnxModel


class TritonPythonModel(RunnerModel):
    bad_input = BAD_INPUT

    def initialize(self, args):
        output_names = self.tensor_names(args)
        settings, version_dir = OnnxRunnerSettings.from_args(args)
        device_id = int(args.get("model_instance_device_id", 0))
        path = version_dir / settings.onnx_model
        self.model = OnnxModel(path, settings.intra_op_threads, output_names, settings.provider, device_id)
