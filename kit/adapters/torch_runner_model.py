"""Triton Python-backend model for a PyTorch checkpoint (installed as `model.py` by kit.control.repository
for a config with a `torch_model` parameter), with the tensors of the model's ONNX export.

It warms its shapes before `initialize` returns, that is before Triton calls the model ready, and logs what that took;
every run goes to the runner's metrics (kit.adapters.runner_metrics). torch is imported by kit.runners.torch alone,
inside the stub; the control plane reads this runner's settings from kit.adapters.settings without it.
"""

import os
from pathlib import Path

from kit.adapters.runner import RunnerModel
from kit.adapters.runner_metrics import RunnerMetrics
from kit.adapters.settings import TorchRunnerSettings, model_settings
from kit.adapters.triton import pb
from kit.pipelines.batching.merge import CostModel
from kit.runners.torch import InputSpec, TorchModel, TorchOptions, Trace, warm_shapes

TRACE_DIR_ENV = "KIT_TRACE_DIR"  # where torch.profiler's traces go (profile_executions); unset: no trace


class TritonPythonModel(RunnerModel):
    def initialize(self, args):
        output_names = self.tensor_names(args)
        settings, version_dir = TorchRunnerSettings.from_args(args)
        name, instance = args["model_name"], args["model_instance_name"]
        # A KIND_GPU instance runs on the GPU Triton placed it on (the profile's `gpus`).
        device = f"cuda:{args.get('model_instance_device_id', 0)}" if settings.device == "cuda" else "cpu"
        options = TorchOptions(settings.dtype, device, settings.cuda_graphs, settings.graph_memory_share, settings.batch_ladder)
        metrics = RunnerMetrics(name)
        self.model = TorchModel.from_checkpoint(version_dir / settings.torch_model, output_names, options, metrics.observe)
        measured = None
        if settings.warm_up:
            config = model_settings(args)[0]
            to_numpy = pb().triton_string_to_numpy
            specs = [InputSpec(i["name"], to_numpy(i["data_type"]), tuple(int(d) for d in i["dims"])) for i in config["input"]]
            warmup = self.model.warm(warm_shapes(specs, settings.batch_ladder, settings.warm_lengths))
            metrics.warmed(warmup)
            pb().Logger.log_info(
                f"{instance}: warmed {warmup.shapes} shapes in {warmup.seconds:.1f} s, {warmup.graphs} as CUDA graphs "
                f"({warmup.graph_bytes / 2**20:.0f} MiB of a {warmup.budget_bytes / 2**20:.0f} MiB budget)"
            )
            measured = CostModel.fit(warmup.costs) if settings.merge_measured else None
        self.trace = None
        if settings.profile_executions and os.environ.get(TRACE_DIR_ENV):
            path = Path(os.environ[TRACE_DIR_ENV]) / f"{instance}.trace.json.gz"
            self.trace = Trace(path, settings.profile_executions, device != "cpu")
        self.plan_runs(args, measured)

    def execute(self, requests):
        responses = super().execute(requests)
        if self.trace is not None and self.trace.step():
            self.trace = None
        return responses
