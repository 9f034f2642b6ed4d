"""The benchmarks' simulated H100 (perf/sim): a profile of perf's own on the gpu-embedded target, whose graphs run a
runner of its own (`runner: custom`, perf/sim/runner_model.py), its device table and cost file linked from beside it.
The kit holds none of it: what a profile may bring (a model.py, files, that runner's parameters) is the kit's."""

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import RepositoryError, parameters
from kit.control.repository import build, plan
from perf.sim.device import SIM
from perf.sim.runner_model import SimRunnerSettings
from tests.profiles import variant

PROFILE = SIM / "sim-h100.json"
SIMULATED = ("radar_classifier", "resnet50_backbone")


def test_the_simulated_device_runs_on_cpu_instances_with_its_table_and_model_py_from_beside_the_profile(
    tmp_path, radar_artifacts
):
    models = build(PROFILE, tmp_path / "repo", radar_artifacts.parent, specs={})
    for name in SIMULATED:
        model = models[name]
        assert model.adapter == SIM / "runner_model.py" and model.settings is None  # its parameters are its own
        settings = SimRunnerSettings.from_parameters(parameters(model.written()))
        assert (settings.sim_table, settings.precision) == ("h100.json", "fp16")
        assert [g.kind for g in model.config.instance_group] == [mc.ModelInstanceGroup.KIND_CPU]
        version = tmp_path / "repo" / name / "1"
        assert (version / "h100.json").samefile(SIM / "h100.json")
        assert (version / "model.py").read_text() == (SIM / "runner_model.py").read_text()
    assert SimRunnerSettings.from_parameters(parameters(models["radar_classifier"].written())).merge
    entry = models["resnet50"]
    assert entry.settings.cost_model == "h100-resnet50-cost.json"
    assert (tmp_path / "repo" / "resnet50" / "1" / "h100-resnet50-cost.json").samefile(SIM / "h100-resnet50-cost.json")


def test_the_simulated_graphs_have_no_queue_policy_and_their_callers_bound_them():
    models = plan(PROFILE, specs={})
    for name in SIMULATED:
        assert not models[name].config.dynamic_batching.HasField("default_queue_policy")
    assert models["radar_texts"].calls == ("radar_classifier",) and models["resnet50"].calls == ("resnet50_backbone",)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"table": "h100"}, r"unknown gpu-embedded settings \['table'\]"),
        ({"runner": "onnx", "model_py": "runner_model.py"}, r"\['model_py'\] do not apply to the onnx runner"),
    ],
)
def test_a_custom_runners_placement_is_checked_as_every_runners_is(tmp_path, change, message):
    data = __import__("json").loads(PROFILE.read_text())
    data["models"]["radar_classifier"] = {**data["models"]["radar_classifier"], **change}
    with pytest.raises(RepositoryError, match=message):
        plan(variant(tmp_path, data, "sim-h100"), specs={})
