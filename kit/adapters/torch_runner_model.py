"""Triton Python-backend model for a PyTorch checkpoint (installed as `model.py` by kit.control.repository
for a config with a `torch_model` parameter), with the tensors of the model's ONNX export.

torch is imported by kit.runners.torch alone, inside the stub; the control plane reads this runner's
settings from kit.adapters.settings without it.
"""

from kit.adapters.runner import RunnerModel
from kit.adapters.settings import TorchRunnerSettings
from kit.runners.torch import TorchModel, TorchOptions


class TritonPythonModel(RunnerModel):
    def initialize(self, args):
        output_names = self.tensor_names(args)
        settings, version_dir = TorchRunnerSettings.from_args(args)
        # A KIND_GPU instance runs on the GPU Triton placed it on (the profile's `gpus`).
        device = f"cuda:{args.get('model_instance_device_id', 0)}" if settings.device == "cuda" else "cpu"
        options = TorchOptions(settings.dtype, device, settings.cuda_graphs)
        self.model = TorchModel.from_checkpoint(version_dir / settings.torch_model, output_names, options)
        self.plan_runs(args, settings, version_dir)
