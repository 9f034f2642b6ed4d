"""Generated repository configs: parse with Triton's schema, keep the source's contract, and carry what
the builder derives from the export (the canary's golden set)."""

import json
import shutil

import pytest

from kit.control.configs import SOURCE, RepositoryError, copy_config, parse_config
from kit.control.deploy import DeployError, Repository, TextModels
from kit.control.derived import check_one_canary, derived_parameters
from kit.control.profiles import load_profile
from kit.control.repository import build, profile_configs, resolved
from kit.control.tasks import canonical_config, canonical_models


def test_every_source_config_parses_and_is_named_after_its_folder():
    models = canonical_models()
    assert {"radar", "radar_classifier"} <= set(models)
    for model in models:
        assert canonical_config(model).name == model


@pytest.mark.parametrize("profile", ["cpu"])
def test_profile_keeps_names_tensors_and_batching_of_the_source(profile):
    settings = load_profile(profile)["models"]
    for model, config in profile_configs(profile).items():
        source = canonical_config(model)
        inputs = [type(tensor)() for tensor in config.input]
        for copy, tensor, original in zip(inputs, config.input, source.input):
            copy.CopyFrom(tensor)
            # A profile may allow ragged batches on the ONNX runner (test_profile_overrides.py).
            copy.allow_ragged_batch = original.allow_ragged_batch
        assert inputs == list(source.input)
        assert config.output == source.output
        # A profile may cap the batch, never raise it (test_profile_overrides.py).
        assert config.max_batch_size == settings.get(model, {}).get("max_batch_size", source.max_batch_size)
        batching = type(config.dynamic_batching)()
        batching.CopyFrom(config.dynamic_batching)
        # A profile may tune these two (the layout search writes them); the queue policy stays the source's.
        batching.max_queue_delay_microseconds = source.dynamic_batching.max_queue_delay_microseconds
        batching.preferred_batch_size[:] = source.dynamic_batching.preferred_batch_size
        assert batching == source.dynamic_batching
        # An ensemble runs its steps on their models' instances: it has none of its own.
        assert len(config.instance_group) == (0 if config.platform == "ensemble" else 1)


def test_cpu_profile_runs_onnx_models_in_the_python_runner():
    configs = profile_configs("cpu")
    classifier = configs["radar_classifier"]
    assert classifier.backend == "python"
    settings = json.loads((SOURCE / "profiles" / "cpu.json").read_text())["models"]["radar_classifier"]
    assert classifier.parameters["onnx_model"].string_value == settings.get("graph", "model.onnx")
    assert classifier.instance_group[0].count == settings["instances"]
    assert classifier.parameters["intra_op_threads"].string_value == str(settings["threads"])


def test_cpu_profile_serves_the_graph_the_export_chose(tmp_path, radar_artifacts):
    """model.cpu.onnx in the version folder is the very file export.json names as the CPU graph."""
    build("cpu", tmp_path / "repo", radar_artifacts.parent)
    served = parse_config((tmp_path / "repo" / "radar_classifier" / "config.pbtxt").read_text()).parameters["onnx_model"]
    chosen = json.loads((radar_artifacts / "export.json").read_text())["cpu_graph"]
    assert (tmp_path / "repo" / "radar_classifier" / "1" / served.string_value).samefile(radar_artifacts / chosen)


def test_a_graph_the_export_did_not_write_is_a_clear_error(tmp_path, radar_artifacts):
    spec = json.loads((SOURCE / "profiles" / "cpu.json").read_text())
    spec["models"]["radar_classifier"]["graph"] = "model.fp16.onnx"
    with pytest.raises(RepositoryError, match="radar_classifier serves model.fp16.onnx, which the export did not write"):
        build("cpu", tmp_path / "repo", radar_artifacts.parent, spec=spec)


def test_graph_is_refused_for_a_model_that_is_not_onnx():
    spec = json.loads((SOURCE / "profiles" / "cpu.json").read_text())
    spec["models"]["ocr"]["graph"] = "model.cpu.onnx"
    with pytest.raises(RepositoryError, match="`graph` is for ONNX models"):
        profile_configs("cpu", spec=spec)


def test_built_repository_configs_round_trip_through_the_schema(tmp_path, radar_artifacts):
    configs = build("cpu", tmp_path / "repo", radar_artifacts.parent)
    for model, config in configs.items():
        written = parse_config((tmp_path / "repo" / model / "config.pbtxt").read_text())
        assert written == config
        assert (tmp_path / "repo" / model / "1" / "model.py").is_file() == (config.platform != "ensemble")
    buckets = [int(b) for b in configs["radar"].parameters["buckets"].string_value.split(",")]
    assert buckets == sorted(buckets) and buckets[-1] == json.loads((radar_artifacts / "export.json").read_text())["max_tokens"]


def test_an_ensembles_steps_call_the_models_of_its_own_version(tmp_path, radar_artifacts):
    """Version 1 of `radar` runs version 1 of radar_texts, never "the newest": kit.control.deploy loads a new
    version of radar_texts beside the serving one and checks it before the ensemble points at it."""
    configs = build("cpu", tmp_path / "repo", radar_artifacts.parent)
    steps = configs["radar"].ensemble_scheduling.step
    assert [(step.model_name, step.model_version) for step in steps] == [("radar_texts", 1)]
    assert (tmp_path / "repo" / "radar" / "1").is_dir()  # Triton loads an ensemble from its version folder


def test_an_ensemble_step_naming_a_model_the_repository_lacks_is_a_clear_error(tmp_path, radar_artifacts):
    source = shutil.copytree(SOURCE, tmp_path / "source")
    (source / "relay").mkdir()
    (source / "relay" / "config.pbtxt").write_text(
        'name: "relay"\nplatform: "ensemble"\ninput [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
        'output [ { name: "SCORE" data_type: TYPE_FP32 dims: [ 1 ] } ]\nensemble_scheduling { step [ { model_name: '
        '"radar_words" model_version: -1 input_map { key: "TEXT" value: "TEXT" } output_map { key: "SCORE" value: '
        '"SCORE" } } ] }\n'
    )
    with pytest.raises(
        RepositoryError, match=r"relay: its ensemble steps name \['radar_words'\], which are not in the repository"
    ):
        build("cpu", tmp_path / "repo", radar_artifacts.parent, source=source)


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(RepositoryError, match="no profile 'tpu'"):
        profile_configs("tpu")


def test_missing_artifacts_name_the_export_step(tmp_path):
    with pytest.raises(RepositoryError, match="make export"):
        build("cpu", tmp_path / "repo", tmp_path / "no-artifacts")


def radar_config(max_chars: int = 300):
    return parse_config(
        'name: "radar" parameters [{ key: "canary_from" value: { string_value: "export.json" } },'
        f' {{ key: "max_chars" value: {{ string_value: "{max_chars}" }} }}]'
    )


def export_json(tmp_path, **sections) -> dict:
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"max_tokens": 512, **sections}))
    return {"export.json": path}


CANARY = {
    "texts": ["Short.", "一段中文。"],
    "scores": [0.25, 0.5],
    "tolerance": 0.001,
    "reference": "PyTorch fp32 (source model)",
}


def test_canary_from_puts_the_exports_golden_set_on_the_config_as_compact_json(tmp_path):
    derived = derived_parameters(radar_config(), {}, export_json(tmp_path, canary=CANARY))
    assert json.loads(derived["canary"]) == CANARY
    assert ": " not in derived["canary"] and derived["canary"].isascii()


def test_canary_from_adds_nothing_when_the_export_has_no_canary(tmp_path):
    assert derived_parameters(radar_config(), {}, export_json(tmp_path)) == {}


def test_canary_from_refuses_a_malformed_golden_set_or_a_text_longer_than_a_chunk(tmp_path):
    with pytest.raises(RepositoryError, match="radar: export.json: the canary has 2 texts and needs as many scores"):
        derived_parameters(radar_config(), {}, export_json(tmp_path, canary={**CANARY, "scores": [0.25]}))
    with pytest.raises(RepositoryError, match="6 characters, over max_chars 5.*--max-chars 5"):
        derived_parameters(radar_config(max_chars=5), {}, export_json(tmp_path, canary=CANARY))
    with pytest.raises(RepositoryError, match="make export"):
        derived_parameters(radar_config(), {}, {})


def test_the_built_radar_config_carries_the_exports_canary(radar_artifacts):
    section = json.loads((radar_artifacts / "export.json").read_text()).get("canary")
    assert section, "the export wrote no canary: re-run `make export`"
    radar = resolved("cpu")[0]["radar"]
    assert radar.parameters["canary_from"].string_value == "export.json"
    assert json.loads(radar.parameters["canary"].string_value) == section


def test_a_model_update_reads_a_text_models_three_models_from_its_entrys_config(tmp_path, radar_artifacts):
    """kit.control.deploy updates any text model that carries a golden set, by its entry's name alone."""
    build("cpu", tmp_path / "repo", radar_artifacts.parent)
    repo = Repository(tmp_path / "repo", "127.0.0.1:1", None, print)
    try:
        assert TextModels.of(repo, "radar") == TextModels("radar", "radar_texts", "radar_classifier")
        with pytest.raises(DeployError, match="not a text model's entry with a golden set"):
            TextModels.of(repo, "ocr")
        with pytest.raises(DeployError, match="has no model 'nothing'"):
            TextModels.of(repo, "nothing")
    finally:
        repo.close()


def test_a_shipped_spec_names_the_export_folder_its_files_come_from(tmp_path, radar_artifacts):
    """radar.toml's `source` is its export's folder in the artifacts folder, as artifacts.json lists its files."""
    source = shutil.copytree(SOURCE, tmp_path / "source")
    spec = (source / "radar.toml").read_text()
    (source / "radar.toml").write_text(spec.replace('source = "radar"', 'source = "radar-large"'))
    with pytest.raises(RepositoryError, match=r"radar.toml: `source` is 'radar-large', but artifacts.json takes radar"):
        resolved("cpu", radar_artifacts.parent, source)


def test_a_second_model_asking_for_the_doors_canary_stops_the_build():
    """The door runs one golden set: two specs with `canary` fail at build time, naming both, not at the door's start."""
    configs = profile_configs("cpu")
    twin = copy_config(configs["radar"])
    twin.name = "twin"
    assert "canary_from" in twin.parameters
    check_one_canary(configs)
    with pytest.raises(RepositoryError, match="radar, twin: each asks for the door's canary"):
        check_one_canary({**configs, "twin": twin})
