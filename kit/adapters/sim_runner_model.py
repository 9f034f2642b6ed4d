"""Triton Python-backend model for a simulated accelerator (installed as `model.py` by kit.control.repository for a
config with a `sim_table` parameter): the tensors of the model's ONNX export, answered after the time a real GPU took
(kit.runners.simulated)."""

from kit.adapters.runner import RunnerModel
from kit.adapters.settings import SimRunnerSettings, model_settings
from kit.runners.simulated import SimulatedModel


class TritonPythonModel(RunnerModel):
    def initialize(self, args):
        self.tensor_names(args)
        config, _, _ = model_settings(args)
        settings, version_dir = SimRunnerSettings.from_args(args)
        sizes = {o["name"]: int(o["dims"][-1]) for o in config["output"]}
        self.model = SimulatedModel(version_dir / settings.sim_table, settings.curve, settings.precision, sizes)
        self.plan_runs(args, settings, version_dir)
