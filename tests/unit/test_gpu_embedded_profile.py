"""The gpu-embedded profile: the embedded server's configs for a GPU host, parsed with Triton's schema.

Nothing here needs a GPU or PyTorch (this venv has neither): the PyTorch runner itself is tested
in tests/export/test_torch_runner.py; what the profile does on a GPU is listed in docs/GPU.md as
not yet measured.
"""

import json

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import OnnxRunnerSettings, SettingsError, TorchRunnerSettings
from kit.control import embedded
from kit.control.configs import RepositoryError, parameters, parse_config, render_config
from kit.control.embedded import default_ladder
from kit.control.profiles import load_profile
from kit.control.repository import build, plan
from kit.control.served import ServedModel, adapter
from kit.runners.onnx import make_session
from tests.profiles import canonical, profile_data, variant

PROFILE = load_profile("gpu-embedded")
TORCH_MODELS = ("radar_classifier", "resnet50_backbone")
OCR_NETWORKS = ("ocr_det", "ocr_cls", "ocr_rec")


@pytest.fixture(scope="module")
def models() -> dict[str, ServedModel]:
    return plan("gpu-embedded", specs={})


@pytest.fixture(scope="module")
def source() -> dict[str, ServedModel]:
    return canonical()


def placement(models: dict[str, ServedModel], name: str) -> dict:
    return PROFILE.placement(models[name].role, name, models[name].config)


def placed(source: dict[str, ServedModel], name: str, settings: dict) -> ServedModel:
    return embedded.place(source[name], settings, "gpu-embedded")


def test_every_config_round_trips_through_tritons_schema(models):
    for model in models.values():
        config = model.written()
        assert parse_config(render_config(config)) == config


def test_names_tensors_max_batch_and_queue_policy_stay_the_tasks(models, source):
    """The queue policy too, but where the profile takes it away (radar_classifier, bounded by radar_texts' window)."""
    for name, model in models.items():
        config, original = model.config, source[name].config
        if config.platform == "ensemble":  # its settings' parameters alone (kit.control.placement.apply_ensemble)
            assert config.ensemble_scheduling == original.ensemble_scheduling
            continue
        assert (config.name, config.output, config.max_batch_size) == (original.name, original.output, original.max_batch_size)
        assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
            (t.name, t.data_type, list(t.dims)) for t in original.input
        ]
        if placement(models, name).get("queue_policy") is False:
            assert not config.dynamic_batching.HasField("default_queue_policy")
        else:
            assert config.dynamic_batching.default_queue_policy == original.dynamic_batching.default_queue_policy
        assert config.backend == "python"


@pytest.mark.parametrize("name", TORCH_MODELS)
def test_classifier_and_backbone_run_the_pytorch_runner_in_fp16_on_explicit_gpus(models, name):
    model, settings = models[name], placement(models, name)
    (group,) = model.config.instance_group
    assert group.kind == mc.ModelInstanceGroup.KIND_GPU
    assert list(group.gpus) == settings["gpus"] and group.count == settings["instances"]
    params = parameters(model.written())
    assert params["torch_model"] == "checkpoint" and "onnx_model" not in params
    assert (params["dtype"], params["device"]) == ("fp16", "cuda")
    assert params["FORCE_CPU_ONLY_INPUT_TENSORS"] == "yes"
    assert all(size <= model.config.max_batch_size for size in model.config.dynamic_batching.preferred_batch_size)


@pytest.mark.parametrize("name", OCR_NETWORKS)
def test_ocr_networks_run_the_onnx_runner_on_cpu_onnx_runtime(models, name):
    model = models[name]
    (group,) = model.config.instance_group
    assert group.kind == mc.ModelInstanceGroup.KIND_CPU and not group.gpus
    assert isinstance(model.settings, OnnxRunnerSettings)
    assert (model.settings.onnx_model, model.settings.provider) == ("model.onnx", "CPUExecutionProvider")
    assert model.settings.intra_op_threads == placement(models, name)["threads"]
    assert parameters(model.written())["FORCE_CPU_ONLY_INPUT_TENSORS"] == "yes"


def test_entry_models_stay_on_cpu_with_their_instance_counts(models):
    for name in ("radar_texts", "ocr", "health_code", "resnet50"):
        (group,) = models[name].config.instance_group
        assert group.kind == mc.ModelInstanceGroup.KIND_CPU
        assert group.count == placement(models, name)["instances"]


def test_radar_keeps_the_specs_bucket_count_as_the_gpu_profile_does(models, source):
    assert "text-entry" not in PROFILE.roles and "text-entry" not in load_profile("gpu").roles
    assert models["radar"].settings.bucket_count == source["radar"].settings.bucket_count


def test_every_model_holds_its_typed_settings(models):
    for name in TORCH_MODELS:
        settings = TorchRunnerSettings.from_parameters(parameters(models[name].written()))
        assert (settings.dtype, settings.device, settings.warm_up, settings.cuda_graphs) == ("fp16", "cuda", True, True)
        assert list(settings.batch_ladder) == default_ladder(models[name].config.max_batch_size)
    for name in OCR_NETWORKS:
        assert models[name].adapter == adapter("onnx_runner_model")


def test_cuda_provider_moves_an_onnx_network_to_the_listed_gpus(source):
    settings = {"runner": "onnx", "provider": "CUDAExecutionProvider", "gpus": [1, 2], "instances": 2}
    model = placed(source, "ocr_rec", settings)
    (group,) = model.config.instance_group
    assert (group.kind, list(group.gpus), group.count) == (mc.ModelInstanceGroup.KIND_GPU, [1, 2], 2)
    assert model.settings.provider == "CUDAExecutionProvider"


@pytest.mark.parametrize(
    ("name", "settings", "message"),
    [
        ("radar_classifier", {"runner": "torch", "precision": "FP16"}, r"unknown gpu-embedded settings \[.precision.\]"),
        ("radar_classifier", {"runner": "torch", "fp16": True}, r"unknown gpu-embedded settings \[.fp16.\]"),
        ("radar_classifier", {"runner": "tensorrt"}, "unknown runner 'tensorrt'"),
        ("radar_classifier", {"runner": "torch", "threads": 2}, r"\['threads'\] do not apply to the torch runner"),
        ("ocr_det", {"runner": "onnx", "dtype": "fp16"}, r"\['dtype'\] do not apply to the onnx runner"),
        ("ocr_det", {"runner": "onnx", "gpus": [0]}, "provider CPUExecutionProvider runs on the CPU"),
        ("radar_texts", {"gpus": [0]}, "are for ONNX models on a runner, not a Python model"),
        ("radar_classifier", {"runner": "torch", "preferred_batch_size": [256]}, "exceed max_batch_size 128"),
        (
            "radar_classifier",
            {"runner": "torch", "batch_ladder": [8, 256]},
            r"batch_ladder \[8, 256\] goes outside 1 .. max_batch_size 128",
        ),
        ("radar_classifier", {"runner": "torch", "device": "cpu", "cuda_graphs": True}, "cuda_graphs needs device cuda"),
        ("ocr_det", {"runner": "onnx", "merge": "measured"}, 'merge "measured" prices runs by the torch runner'),
        ("radar_classifier", {"runner": "torch", "device": "tpu"}, "device 'tpu' is not one of cuda, cpu"),
        ("radar_classifier", {"runner": "torch", "device": "cpu", "gpus": [0]}, "device cpu runs on the CPU"),
    ],
)
def test_settings_that_cannot_work_are_refused_with_a_reason(source, name, settings, message):
    with pytest.raises(RepositoryError, match=message):
        placed(source, name, settings)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dtype": "fp8"}, "dtype 'fp8' is not one of"),
        ({"cuda_graphs": 8}, r"parameter cuda_graphs='8'"),
        ({"batch_ladder": [8, 4]}, r"batch_ladder \[8, 4\] is not rising"),
        ({"graph_memory_share": 1.5}, "graph_memory_share 1.5 is not a share"),
        ({"merge": "measured", "warm_up": False}, "merge_measured prices runs by the warm-up's times"),
    ],
)
def test_runner_values_are_checked_by_their_typed_settings_at_build(tmp_path, change, message):
    data = profile_data("gpu-embedded")
    data["models"]["radar_classifier"] = {**data["models"]["radar_classifier"], **change}
    with pytest.raises(RepositoryError, match=message):
        plan(variant(tmp_path, data, "gpu-embedded"), specs={})


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        (TorchRunnerSettings, {"torch_model": "checkpoint", "dtype": "fp16", "device": "cpu"}, "fp16 needs device cuda"),
        (TorchRunnerSettings, {"torch_model": "checkpoint", "FORCE_CPU_ONLY_INPUT_TENSORS": "no"}, "must stay yes"),
        (
            OnnxRunnerSettings,
            {"onnx_model": "model.onnx", "intra_op_threads": "1", "provider": "OpenVINOExecutionProvider"},
            "not one of",
        ),
    ],
)
def test_runner_settings_refuse_what_the_runner_cannot_do(kind, params, message):
    with pytest.raises(SettingsError, match=message):
        kind.from_parameters(params)


def test_a_gpu_provider_missing_from_this_onnxruntime_is_a_clear_error(radar_artifacts):
    with pytest.raises(RuntimeError, match="needs onnxruntime-gpu"):
        make_session(radar_artifacts / "model.onnx", 1, "CUDAExecutionProvider")


def test_built_repository_installs_the_runners_and_links_the_checkpoints(tmp_path, radar_artifacts):
    artifacts = tmp_path / "artifacts"
    for folder in radar_artifacts.parent.iterdir():
        if folder.is_dir():
            (artifacts / folder.name).mkdir(parents=True)
            for path in folder.iterdir():
                if path.name != "checkpoint":
                    (artifacts / folder.name / path.name).symlink_to(path.resolve())
    for folder in ("radar", "resnet50"):
        (artifacts / folder / "checkpoint").mkdir()
        (artifacts / folder / "checkpoint" / "config.json").write_text(json.dumps({}))
    models = build("gpu-embedded", tmp_path / "repo", artifacts, specs={})
    for name, model in models.items():
        version = tmp_path / "repo" / name / "1"
        assert parse_config((tmp_path / "repo" / name / "config.pbtxt").read_text()) == model.written()
        if model.adapter is not None:
            assert (version / "model.py").read_text() == model.adapter.read_text()
    for name in TORCH_MODELS:
        assert models[name].adapter == adapter("torch_runner_model")
        assert (tmp_path / "repo" / name / "1" / "checkpoint" / "config.json").is_file()


def test_the_pytorch_runner_on_the_cpu_takes_cpu_instances(source):
    model = placed(source, "resnet50_backbone", {"runner": "torch", "device": "cpu", "dtype": "fp32", "instances": 2})
    assert (model.settings.device, model.settings.dtype) == ("cpu", "fp32")
    assert [(g.kind, list(g.gpus), g.count) for g in model.config.instance_group] == [(mc.ModelInstanceGroup.KIND_CPU, [], 2)]


@pytest.mark.parametrize("merge", [{"table": "h100", "curve": "radar"}, "h100", True])
def test_a_merge_other_than_the_runners_own_measure_is_refused(source, merge):
    with pytest.raises(RepositoryError, match='merge is "measured"'):
        placed(source, "radar_classifier", {"runner": "torch", "merge": merge})


def test_a_null_merge_turns_the_profiles_pricing_off_and_each_length_runs_apart(models, source):
    settings = {**placement(models, "radar_classifier"), "merge": None}
    runner = placed(source, "radar_classifier", settings).settings
    assert not runner.merge_measured


def test_the_default_ladder_doubles_up_to_the_batch_cap_and_ends_on_it():
    assert default_ladder(128) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert default_ladder(48) == [1, 2, 4, 8, 16, 32, 48]
    assert default_ladder(1) == [1] and default_ladder(0) == []


def test_the_classifier_warms_the_lengths_its_text_model_pads_to_and_a_backbone_of_any_size_none(models):
    assert models["radar_classifier"].settings.warm_lengths == models["radar"].settings.buckets
    assert models["resnet50_backbone"].settings.warm_lengths == ()


def test_the_control_variant_runs_as_requests_come_without_warm_up_or_graphs(models, source):
    settings = {
        **placement(models, "radar_classifier"),
        "batch_ladder": [],
        "warm_up": False,
        "cuda_graphs": False,
        "merge": None,
    }
    runner = placed(source, "radar_classifier", settings).settings
    assert (runner.batch_ladder, runner.warm_up, runner.cuda_graphs) == ((), False, False)


def test_a_measured_merge_prices_runs_by_the_runners_own_warm_up(models):
    runner = models["radar_classifier"].settings
    assert runner.merge_measured
