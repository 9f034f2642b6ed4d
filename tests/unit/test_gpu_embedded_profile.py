"""The gpu-embedded profile: the embedded server's configs for a GPU host, parsed with Triton's schema.

Nothing here needs a GPU or PyTorch (this venv has neither): the PyTorch runner itself is tested
in tests/export/test_torch_runner.py; what the profile does on a GPU is listed in docs/GPU.md as
not yet measured.
"""

import json

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import OnnxRunnerSettings, SettingsError, SimRunnerSettings, TorchRunnerSettings, settings_class
from kit.control.configs import SOURCE, RepositoryError, parameters, parse_config, render_config
from kit.control.gpu_embedded_profile import apply_gpu_embedded_profile, default_ladder
from kit.control.profiles import load_profile
from kit.control.repository import RUNNERS, build, profile_configs, resolved
from kit.control.tasks import canonical_config
from kit.runners.onnx import make_session

PROFILE = load_profile("gpu-embedded")["models"]
TORCH_MODELS = ("radar_classifier", "resnet50_backbone")
OCR_NETWORKS = ("ocr_det", "ocr_cls", "ocr_rec")


@pytest.fixture(scope="module")
def configs():
    return profile_configs("gpu-embedded")


def test_every_config_round_trips_through_tritons_schema(configs):
    for config in configs.values():
        assert parse_config(render_config(config)) == config


def test_names_tensors_max_batch_and_queue_policy_stay_the_sources(configs):
    """The queue policy too, but where the profile takes it away (radar_classifier, bounded by radar_texts' window)."""
    for model, config in configs.items():
        if config.platform == "ensemble":  # its parameters alone (kit.control.profiles.apply_ensemble)
            assert config.ensemble_scheduling == canonical_config(model).ensemble_scheduling
            continue
        source = canonical_config(model)
        assert (config.name, config.output, config.max_batch_size) == (source.name, source.output, source.max_batch_size)
        assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
            (t.name, t.data_type, list(t.dims)) for t in source.input
        ]
        if PROFILE.get(model, {}).get("queue_policy") is False:
            assert not config.dynamic_batching.HasField("default_queue_policy")
        else:
            assert config.dynamic_batching.default_queue_policy == source.dynamic_batching.default_queue_policy
        assert config.backend == "python"


@pytest.mark.parametrize("model", TORCH_MODELS)
def test_classifier_and_backbone_run_the_pytorch_runner_in_fp16_on_explicit_gpus(configs, model):
    config, settings = configs[model], PROFILE[model]
    (group,) = config.instance_group
    assert group.kind == mc.ModelInstanceGroup.KIND_GPU
    assert list(group.gpus) == settings["gpus"] and group.count == settings["instances"]
    params = parameters(config)
    assert params["torch_model"] == "checkpoint" and "onnx_model" not in params
    assert (params["dtype"], params["device"]) == ("fp16", "cuda")
    assert params["FORCE_CPU_ONLY_INPUT_TENSORS"] == "yes"
    assert all(size <= config.max_batch_size for size in config.dynamic_batching.preferred_batch_size)


@pytest.mark.parametrize("model", OCR_NETWORKS)
def test_ocr_networks_run_the_onnx_runner_on_cpu_onnx_runtime(configs, model):
    config = configs[model]
    (group,) = config.instance_group
    assert group.kind == mc.ModelInstanceGroup.KIND_CPU and not group.gpus
    params = parameters(config)
    assert (params["onnx_model"], params["provider"]) == ("model.onnx", "CPUExecutionProvider")
    assert params["intra_op_threads"] == str(PROFILE[model]["threads"])
    assert params["FORCE_CPU_ONLY_INPUT_TENSORS"] == "yes"


def test_entry_models_stay_on_cpu_with_their_instance_counts(configs):
    for model in ("radar_texts", "ocr", "health_code", "resnet50"):
        (group,) = configs[model].instance_group
        assert group.kind == mc.ModelInstanceGroup.KIND_CPU
        assert group.count == PROFILE[model]["instances"]


def test_radar_keeps_the_sources_bucket_count_as_the_gpu_profile_does(configs):
    assert "radar" not in PROFILE and "radar" not in load_profile("gpu")["models"]
    assert configs["radar"].parameters["bucket_count"] == canonical_config("radar").parameters["bucket_count"]


def test_every_model_passes_its_typed_settings(radar_artifacts):
    configs, _ = resolved("gpu-embedded", radar_artifacts.parent)  # raises on any parameter its settings refuse
    for model in TORCH_MODELS:
        settings = TorchRunnerSettings.from_parameters(parameters(configs[model]))
        assert (settings.dtype, settings.device, settings.warm_up, settings.cuda_graphs) == ("fp16", "cuda", True, True)
        assert list(settings.batch_ladder) == default_ladder(configs[model].max_batch_size)
    for model in OCR_NETWORKS:
        assert settings_class(parameters(configs[model])) is OnnxRunnerSettings


def test_cuda_provider_moves_an_onnx_network_to_the_listed_gpus():
    settings = {"runner": "onnx", "provider": "CUDAExecutionProvider", "gpus": [1, 2], "instances": 2}
    config = apply_gpu_embedded_profile(canonical_config("ocr_rec"), settings)
    (group,) = config.instance_group
    assert (group.kind, list(group.gpus), group.count) == (mc.ModelInstanceGroup.KIND_GPU, [1, 2], 2)
    assert OnnxRunnerSettings.from_parameters(parameters(config)).provider == "CUDAExecutionProvider"


@pytest.mark.parametrize(
    ("model", "settings", "message"),
    [
        ("radar_classifier", {"runner": "torch", "precision": "FP16"}, r"\[.precision.\] do not apply to the torch runner"),
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
def test_settings_that_cannot_work_are_refused_with_a_reason(model, settings, message):
    with pytest.raises(RepositoryError, match=message):
        apply_gpu_embedded_profile(canonical_config(model), settings)


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
def test_runner_values_are_checked_by_their_typed_settings_at_build(radar_artifacts, change, message):
    spec = load_profile("gpu-embedded")
    spec["models"]["radar_classifier"] = {**spec["models"]["radar_classifier"], **change}
    with pytest.raises(RepositoryError, match=message):
        resolved("gpu-embedded", radar_artifacts.parent, spec=spec)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"torch_model": "checkpoint", "dtype": "fp16", "device": "cpu"}, "fp16 needs device cuda"),
        ({"torch_model": "checkpoint", "FORCE_CPU_ONLY_INPUT_TENSORS": "no"}, "must stay yes"),
        ({"onnx_model": "model.onnx", "intra_op_threads": "1", "provider": "OpenVINOExecutionProvider"}, "not one of"),
    ],
)
def test_runner_settings_refuse_what_the_runner_cannot_do(params, message):
    with pytest.raises(SettingsError, match=message):
        settings_class(params).from_parameters(params)


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
    configs = build("gpu-embedded", tmp_path / "repo", artifacts)
    for model, config in configs.items():
        version = tmp_path / "repo" / model / "1"
        assert parse_config((tmp_path / "repo" / model / "config.pbtxt").read_text()) == config
        runner = [path for key, path in RUNNERS.items() if key in config.parameters]
        if runner:
            assert (version / "model.py").read_text() == runner[0].read_text()
    for model in TORCH_MODELS:
        assert (tmp_path / "repo" / model / "1" / "checkpoint" / "config.json").is_file()


def test_the_pytorch_runner_on_the_cpu_takes_cpu_instances():
    config = apply_gpu_embedded_profile(
        canonical_config("resnet50_backbone"), {"runner": "torch", "device": "cpu", "dtype": "fp32", "instances": 2}
    )
    assert parameters(config)["device"] == "cpu" and parameters(config)["dtype"] == "fp32"
    assert [(g.kind, list(g.gpus), g.count) for g in config.instance_group] == [(mc.ModelInstanceGroup.KIND_CPU, [], 2)]


def test_the_simulated_device_runs_on_cpu_instances_with_its_device_table_linked(tmp_path, radar_artifacts):
    configs = build("sim-h100", tmp_path / "repo", radar_artifacts.parent)
    for model in TORCH_MODELS:
        params, config = parameters(configs[model]), configs[model]
        assert settings_class(params) is SimRunnerSettings and SimRunnerSettings.from_parameters(params)
        assert [g.kind for g in config.instance_group] == [mc.ModelInstanceGroup.KIND_CPU]
        version = tmp_path / "repo" / model / "1"
        assert (version / params["sim_table"]).samefile(SOURCE / "devices" / "h100.json")
        assert (version / "model.py").read_text() == RUNNERS["sim_table"].read_text()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"runner": "sim", "curve": "radar"}, "the sim runner needs `table`"),
        ({"runner": "sim", "table": "h100", "curve": "radar", "dtype": "fp16"}, r"\['dtype'\] do not apply to the sim runner"),
    ],
)
def test_a_simulated_device_without_its_table_or_with_another_runners_settings_is_refused(settings, message):
    with pytest.raises(RepositoryError, match=message):
        apply_gpu_embedded_profile(canonical_config("radar_classifier"), settings)


def test_a_device_table_that_is_not_there_is_named_with_the_ones_that_are(radar_artifacts):
    spec = load_profile("sim-h100")
    spec["models"]["radar_classifier"]["table"] = "a100"
    with pytest.raises(RepositoryError, match=r"no device table a100.json .*h100.json"):
        resolved("sim-h100", radar_artifacts.parent, spec=spec)


def test_a_runner_priced_by_a_device_table_gets_it_linked_at_the_runners_precision(tmp_path, radar_artifacts):
    spec = load_profile("sim-h100")
    spec["models"]["radar_classifier"]["merge"] = {"table": "h100", "curve": "radar"}
    configs = build("sim-h100", tmp_path / "repo", radar_artifacts.parent, spec=spec)
    params = parameters(configs["radar_classifier"])
    assert (params["merge_table"], params["merge_curve"], params["merge_precision"]) == ("h100.json", "radar", "fp16")
    assert SimRunnerSettings.from_parameters(params).merge_table == "h100.json"
    assert (tmp_path / "repo" / "radar_classifier" / "1" / "h100.json").samefile(SOURCE / "devices" / "h100.json")
    onnx = apply_gpu_embedded_profile(canonical_config("ocr_rec"), {"merge": {"table": "h100", "curve": "radar"}})
    assert parameters(onnx)["merge_precision"] == "fp32"


@pytest.mark.parametrize(
    ("merge", "message"),
    [
        ({"table": "h100"}, "merge takes"),
        ("h100", "merge takes"),
        ({"table": "h100", "curve": "radar", "batch": 64}, "merge takes"),
        ({"table": "h100", "curve": "bert"}, r"merge_table h100.json: the device table has no 'bert' rows"),
        ({"table": "a100", "curve": "radar"}, r"no device table a100.json"),
    ],
)
def test_a_merge_price_that_cannot_be_read_is_refused_at_build_naming_it(radar_artifacts, merge, message):
    spec = load_profile("sim-h100")
    spec["models"]["radar_classifier"]["merge"] = merge
    with pytest.raises(RepositoryError, match=message):
        resolved("sim-h100", radar_artifacts.parent, spec=spec)


def test_a_null_merge_turns_the_profiles_pricing_off_and_each_length_runs_apart():
    settings = {**PROFILE["radar_classifier"], "merge": None}
    params = parameters(apply_gpu_embedded_profile(canonical_config("radar_classifier"), settings))
    assert "merge_table" not in params and not TorchRunnerSettings.from_parameters(params).merge_table


def test_the_default_ladder_doubles_up_to_the_batch_cap_and_ends_on_it():
    assert default_ladder(128) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert default_ladder(48) == [1, 2, 4, 8, 16, 32, 48]
    assert default_ladder(1) == [1] and default_ladder(0) == []


def test_the_classifier_warms_the_lengths_its_text_model_pads_to_and_a_backbone_of_any_size_none(radar_artifacts):
    configs, files = resolved("gpu-embedded", radar_artifacts.parent)
    classifier = TorchRunnerSettings.from_parameters(parameters(configs["radar_classifier"]))
    assert classifier.warm_lengths == tuple(int(b) for b in parameters(configs["radar"])["buckets"].split(","))
    assert "token_lengths.json" in files["radar_classifier"]
    assert TorchRunnerSettings.from_parameters(parameters(configs["resnet50_backbone"])).warm_lengths == ()


def test_the_control_variant_runs_as_requests_come_without_warm_up_or_graphs():
    settings = {**PROFILE["radar_classifier"], "batch_ladder": [], "warm_up": False, "cuda_graphs": False, "merge": None}
    runner = TorchRunnerSettings.from_parameters(
        parameters(apply_gpu_embedded_profile(canonical_config("radar_classifier"), settings))
    )
    assert (runner.batch_ladder, runner.warm_up, runner.cuda_graphs) == ((), False, False)


def test_a_measured_merge_prices_runs_by_the_runners_own_warm_up():
    settings = {**PROFILE["radar_classifier"], "merge": "measured"}
    params = parameters(apply_gpu_embedded_profile(canonical_config("radar_classifier"), settings))
    runner = TorchRunnerSettings.from_parameters(params)
    assert runner.merge_measured and not runner.merge_table
