"""The simulated accelerator's model.py (perf.sim.device), a runner of the sim-h100 profile's own (its `runner:
custom`): the tensors of the model's ONNX export, answered after the time a real GPU took for each batch. With
`merge`, the requests of different shapes of an execution run as one padded batch where the same table prices that
cheaper, as a GPU's launches would."""

from dataclasses import dataclass

from kit.adapters.runner import RunnerModel
from kit.adapters.settings import Settings, SettingsError, model_settings
from kit.pipelines.batching.merge import CostModel
from perf.sim.device import Curve, SimulatedModel

PRECISIONS = ("fp16", "fp32")


@dataclass(frozen=True)
class SimRunnerSettings(Settings):
    """`sim_table`: the device table's file in the version folder; `curve`: its model's rows, at `precision`; `merge`:
    price the runs of an execution by the same rows. FORCE_CPU_ONLY_INPUT_TENSORS is the Python backend's own."""

    sim_table: str
    curve: str
    precision: str = "fp16"
    merge: bool = False
    FORCE_CPU_ONLY_INPUT_TENSORS: bool = True

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise SettingsError(f"precision {self.precision!r} is not one of {PRECISIONS}")


class TritonPythonModel(RunnerModel):
    def initialize(self, args):
        self.tensor_names(args)
        config, _, _ = model_settings(args)
        settings, version_dir = SimRunnerSettings.from_args(args)
        sizes = {o["name"]: int(o["dims"][-1]) for o in config["output"]}
        table = version_dir / settings.sim_table
        self.model = SimulatedModel(table, settings.curve, settings.precision, sizes)
        if settings.merge:
            self.plan_runs(args, CostModel.fit(Curve.from_file(table, settings.curve, settings.precision).samples()))
