"""The GPU profile: derived by backend from the same sources as the CPU one, parsed with Triton's schema.

Nothing here needs a GPU: what these configs do on one is listed in docs/GPU.md as still owed.
"""

import importlib.util
import json
import subprocess
import sys

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from export.tensorrt import SetupError, parse_profile, parse_shapes
from kit.control import container
from kit.control.configs import REPO_ROOT, RepositoryError, parse_config, render_config
from kit.control.container import TRT_CACHE_ROOT, shape_profiles
from kit.control.profiles import load_profile
from kit.control.repository import build, plan
from kit.control.repository import main as repository_main
from kit.control.served import ServedModel
from tests.profiles import canonical

GPU = load_profile("gpu")
CPU = load_profile("cpu")
TOKENS = {point: {"input_ids": [n], "attention_mask": [n]} for point, n in (("min", 1), ("opt", 128), ("max", 512))}


@pytest.fixture(scope="module")
def source() -> dict[str, ServedModel]:
    return canonical()


@pytest.fixture(scope="module")
def gpu_models() -> dict[str, ServedModel]:
    return plan("gpu", specs={})


@pytest.fixture(scope="module")
def gpu_configs(gpu_models):
    return {name: model.written() for name, model in gpu_models.items()}


def settings_of(models: dict[str, ServedModel], name: str, profile=GPU) -> dict:
    return profile.placement(models[name].role, name, models[name].config)


def onnx_models():
    return [name for name, model in canonical().items() if model.config.backend == "onnxruntime"]


def placed(source: dict[str, ServedModel], name: str, settings: dict) -> mc.ModelConfig:
    return container.place(source[name], settings).config


def test_every_gpu_config_round_trips_through_tritons_schema(gpu_configs):
    for config in gpu_configs.values():
        assert parse_config(render_config(config)) == config


def test_gpu_configs_agree_with_cpu_on_names_tensors_max_batch_and_batching(gpu_models, gpu_configs, source):
    cpu_models = plan("cpu", specs={})
    cpu_configs = {name: model.written() for name, model in cpu_models.items()}
    assert gpu_configs.keys() == cpu_configs.keys()
    for model, gpu in gpu_configs.items():
        cpu, original = cpu_configs[model], source[model].config
        for field in ("name", "output"):
            assert getattr(gpu, field) == getattr(cpu, field), (model, field)
        # A profile may cap the batch (on CPU, small executions keep single-thread instances busy).
        for config, models, profile in ((gpu, gpu_models, GPU), (cpu, cpu_models, CPU)):
            cap = settings_of(models, model, profile).get("max_batch_size", original.max_batch_size)
            assert config.max_batch_size == cap, model
        # The CPU profile may let the ONNX runner take ragged batches (kit.runners.onnx); on GPU the
        # native backend keeps the task's inputs.
        assert gpu.input == original.input, model
        for tensor, canonical_tensor in zip(cpu.input, original.input):
            tensor.allow_ragged_batch = canonical_tensor.allow_ragged_batch
        assert cpu.input == original.input, model
        assert gpu.HasField("dynamic_batching") == cpu.HasField("dynamic_batching")
        assert gpu.HasField("dynamic_batching") == original.HasField("dynamic_batching")
        expected = mc.ModelDynamicBatching()
        expected.CopyFrom(original.dynamic_batching)
        settings = settings_of(gpu_models, model)
        if "max_queue_delay_microseconds" in settings:
            expected.max_queue_delay_microseconds = settings["max_queue_delay_microseconds"]
        if "preferred_batch_size" in settings:
            expected.preferred_batch_size[:] = settings["preferred_batch_size"]
        if settings.get("queue_policy") is False:
            expected.ClearField("default_queue_policy")
        assert gpu.dynamic_batching == expected
        for key, value in source[model].config.parameters.items():  # the door's; settings follow the placement
            assert gpu.parameters[key] == value


@pytest.mark.parametrize("model", onnx_models())
def test_onnx_models_stay_native_with_tensorrt_on_every_listed_gpu(gpu_models, gpu_configs, model):
    config, settings = gpu_configs[model], settings_of(gpu_models, model)
    assert config.backend == "onnxruntime"
    (group,) = config.instance_group
    assert group.kind == mc.ModelInstanceGroup.KIND_GPU
    assert list(group.gpus) == settings.get("gpus", [0])
    assert group.count == settings.get("instances", 1)
    (accelerator,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert accelerator.name == "tensorrt"
    assert accelerator.parameters["precision_mode"] == settings.get("precision", "FP32")
    assert accelerator.parameters["trt_engine_cache_path"] == f"{TRT_CACHE_ROOT}/{model}"
    assert config.optimization.input_pinned_memory.enable and config.optimization.output_pinned_memory.enable
    assert not config.optimization.cuda.graphs


def test_radar_classifier_engine_covers_batch_1_to_max_and_every_token_length(gpu_configs, radar_artifacts):
    config = gpu_configs["radar_classifier"]
    max_tokens = json.loads((radar_artifacts / "export.json").read_text())["max_tokens"]
    parameters = config.optimization.execution_accelerators.gpu_execution_accelerator[0].parameters
    low, high = parse_shapes(parameters["trt_profile_min_shapes"]), parse_shapes(parameters["trt_profile_max_shapes"])
    assert low == {"input_ids": [1, 1], "attention_mask": [1, 1]}
    largest = [config.max_batch_size, max_tokens]
    assert high == {"input_ids": largest, "attention_mask": largest}


def test_python_models_stay_on_cpu_with_their_profile_instance_counts(gpu_models, gpu_configs):
    python = [m for m, c in gpu_configs.items() if c.backend == "python"]
    assert "radar_texts" in python
    for model in python:
        (group,) = gpu_configs[model].instance_group
        assert group.kind == mc.ModelInstanceGroup.KIND_CPU
        assert group.count == settings_of(gpu_models, model).get("instances", 1)


def test_a_four_gpu_host_gets_the_instances_on_every_gpu(source):
    config = placed(source, "radar_classifier", {"gpus": [0, 1, 2, 3], "instances": 2})
    (group,) = config.instance_group
    assert (list(group.gpus), group.count) == ([0, 1, 2, 3], 2)


def test_tensorrt_plan_variant_serves_the_engine_with_cuda_graphs_and_one_profile_per_length_range(source):
    short, long = (
        {point: {"input_ids": [n], "attention_mask": [n]} for point, n in zip(("min", "opt", "max"), lengths)}
        for lengths in ((1, 64, 128), (129, 256, 512))
    )
    graph = {"batch_size": 32, "input": {"input_ids": {"dim": [128]}, "attention_mask": {"dim": [128]}}}
    settings = {"engine": "tensorrt_plan", "shapes": [short, long], "cuda_graphs": [graph], "gpus": [0, 1]}
    config = placed(source, "radar_classifier", settings)
    assert (config.platform, config.backend) == ("tensorrt_plan", "tensorrt")
    assert config.default_model_filename == "model.plan"
    assert not config.optimization.execution_accelerators.gpu_execution_accelerator
    assert list(config.instance_group[0].profile) == ["0", "1"]
    assert config.optimization.cuda.graphs
    assert config.optimization.cuda.graph_spec[0].batch_size == 32
    assert list(config.optimization.cuda.graph_spec[0].input["input_ids"].dim) == [128]
    assert parse_config(render_config(config)) == config


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"cuda_graphs": []}, "CUDA graphs apply only to engine tensorrt_plan"),
        ({"precison": "FP16"}, "unknown GPU settings \\['precison'\\]"),
        ({"accelerator": "openvino"}, "unknown accelerator"),
        ({"shapes": [{"min": {"input_ids": [1, 512]}}]}, "does not fit dims"),
        ({"shapes": [{"min": {"attention_mask": [1]}}]}, "needs a size for every dynamic dim of input_ids"),
        ({"shapes": [TOKENS, TOKENS]}, "takes one shape profile"),
        ({"engine": "tensorrt_plan"}, "needs `shapes`"),
    ],
)
def test_settings_that_cannot_work_are_refused_with_a_reason(source, settings, message):
    with pytest.raises(RepositoryError, match=message):
        placed(source, "radar_classifier", settings)


def test_built_gpu_repository_has_no_model_py_for_onnx_models(tmp_path, radar_artifacts):
    models = build("gpu", tmp_path / "repo", radar_artifacts.parent, specs={})
    configs = {name: model.written() for name, model in models.items()}
    for model, config in configs.items():
        folder = tmp_path / "repo" / model
        assert parse_config((folder / "config.pbtxt").read_text()) == config
        if config.backend == "onnxruntime":
            assert not (folder / "1" / "model.py").exists()
            assert (folder / "1" / "model.onnx").is_file()
        elif config.platform == "ensemble":
            assert not (folder / "1" / "model.py").exists()
        else:
            assert (folder / "1" / "model.py").is_file()
    assert configs["radar"].parameters["buckets"].string_value


def test_trt_shapes_command_prints_the_profile_export_tensorrt_builds(capsys, gpu_models):
    assert repository_main(["trt-shapes", "radar_classifier"]) == 0
    words = capsys.readouterr().out.split()
    assert words[0] == "--profile-shapes" and len(words) % 4 == 0
    profiles = [parse_profile(*words[i + 1 : i + 4]) for i in range(0, len(words), 4)]
    config = gpu_models["radar_classifier"].config
    assert profiles == shape_profiles(config, GPU.models["radar_classifier"])
    assert profiles[0]["input_ids"][2][0] == config.max_batch_size


def test_profile_shapes_need_min_opt_max_in_order():
    assert parse_profile("x:1x4", "x:8x4", "x:32x4") == {"x": ([1, 4], [8, 4], [32, 4])}
    with pytest.raises(SetupError, match="min <= opt <= max"):
        parse_profile("x:8x4", "x:1x4", "x:32x4")
    with pytest.raises(SetupError, match="different inputs"):
        parse_profile("x:1", "y:1", "x:1")


@pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None, reason="TensorRT is installed here")
def test_tensorrt_export_refuses_clearly_when_tensorrt_is_missing(tmp_path, radar_artifacts, capsys):
    assert repository_main(["trt-shapes", "radar_classifier"]) == 0
    shapes = capsys.readouterr().out.split()
    out = tmp_path / "model.plan"
    run = subprocess.run(
        [sys.executable, "-m", "export.tensorrt", "--onnx", str(radar_artifacts / "model.onnx"), "--out", str(out)]
        + shapes
        + ["--int-high", "100"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert run.returncode == 2, run.stderr
    assert "TensorRT is not installed" in run.stderr
    assert "pip install tensorrt==10.5.0" in run.stderr
    assert not out.exists()
