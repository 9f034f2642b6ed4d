"""Generated repository configs: parse with Triton's schema, keep the tasks' contract, and carry what the text task
derives from the export (the canary's golden set)."""

import json
import shutil
import socket
from dataclasses import replace

import pytest

from kit.adapters.settings import TextSettings
from kit.control.configs import SOURCE, RepositoryError, parse_config
from kit.control.profiles import load_profile
from kit.control.repository import build, check_one_canary, pin_steps, plan
from kit.control.tasks import shipped_models
from kit.control.text_task import derive
from kit.server import deploy
from kit.server.deploy import DeployError, Repository, TextModels
from tests.profiles import canonical, profile_data, variant


def test_every_shipped_model_is_planned_under_its_name():
    models = canonical()
    assert {"radar", "radar_classifier", "ocr_det"} <= set(models) == set(shipped_models())
    for name, model in models.items():
        assert model.config.name == name


@pytest.mark.parametrize("profile", ["cpu"])
def test_profile_keeps_names_tensors_and_batching_of_the_tasks(profile):
    source = canonical()
    for model, served in plan(profile, specs={}).items():
        config, original = served.config, source[model].config
        inputs = [type(tensor)() for tensor in config.input]
        for copy, tensor, canonical_tensor in zip(inputs, config.input, original.input):
            copy.CopyFrom(tensor)
            # A profile may allow ragged batches on the ONNX runner (test_profile_overrides.py).
            copy.allow_ragged_batch = canonical_tensor.allow_ragged_batch
        assert inputs == list(original.input)
        assert config.output == original.output
        # A profile may cap the batch, never raise it (test_profile_overrides.py).
        assert config.max_batch_size <= original.max_batch_size
        batching = type(config.dynamic_batching)()
        batching.CopyFrom(config.dynamic_batching)
        # A profile may tune these two; the queue policy stays the task's.
        batching.max_queue_delay_microseconds = original.dynamic_batching.max_queue_delay_microseconds
        batching.preferred_batch_size[:] = original.dynamic_batching.preferred_batch_size
        assert batching == original.dynamic_batching
        # An ensemble runs its steps on their models' instances: it has none of its own.
        assert len(config.instance_group) == (0 if config.platform == "ensemble" else 1)


def test_cpu_profile_runs_onnx_models_in_the_python_runner():
    classifier = plan("cpu", specs={})["radar_classifier"]
    assert classifier.config.backend == "python" and classifier.role == "text-graph"
    placement = load_profile("cpu").placement("text-graph", "radar_classifier", classifier.config)
    assert classifier.settings.onnx_model == placement.get("graph", "model.onnx")
    assert classifier.config.instance_group[0].count == placement["instances"]
    assert classifier.settings.intra_op_threads == placement["threads"]


def test_cpu_profile_serves_the_graph_the_export_chose(tmp_path, radar_artifacts):
    """model.cpu.onnx in the version folder is the very file export.json names as the CPU graph."""
    build("cpu", tmp_path / "repo", radar_artifacts.parent, specs={})
    served = parse_config((tmp_path / "repo" / "radar_classifier" / "config.pbtxt").read_text()).parameters["onnx_model"]
    chosen = json.loads((radar_artifacts / "export.json").read_text())["cpu_graph"]
    assert (tmp_path / "repo" / "radar_classifier" / "1" / served.string_value).samefile(radar_artifacts / chosen)


def test_a_graph_the_export_did_not_write_is_a_clear_error(tmp_path, radar_artifacts):
    data = profile_data("cpu")
    data["roles"]["text-graph"]["graph"] = "model.fp16.onnx"
    with pytest.raises(RepositoryError, match="radar_classifier serves model.fp16.onnx, which the export did not write"):
        build(variant(tmp_path, data), tmp_path / "repo", radar_artifacts.parent, specs={})


def test_graph_is_refused_for_a_model_that_is_not_onnx(tmp_path):
    data = profile_data("cpu")
    data["models"]["ocr"]["graph"] = "model.cpu.onnx"
    with pytest.raises(RepositoryError, match=r"ocr: \['graph'\] are for ONNX models on a runner"):
        plan(variant(tmp_path, data), specs={})


def test_a_role_the_kit_does_not_know_is_refused_naming_the_roles(tmp_path):
    data = profile_data("cpu")
    data["roles"]["text-classifier"] = {"instances": 3}
    with pytest.raises(RepositoryError, match=r"unknown roles \['text-classifier'\] \(the roles are onnx-graph"):
        plan(variant(tmp_path, data), specs={})


def test_built_repository_configs_round_trip_through_the_schema(tmp_path, radar_artifacts):
    models = build("cpu", tmp_path / "repo", radar_artifacts.parent, specs={})
    for name, model in models.items():
        written = parse_config((tmp_path / "repo" / name / "config.pbtxt").read_text())
        assert written == model.written()
        assert (tmp_path / "repo" / name / "1" / "model.py").is_file() == (model.config.platform != "ensemble")
    buckets = [int(b) for b in models["radar"].written().parameters["buckets"].string_value.split(",")]
    assert buckets == sorted(buckets) and buckets[-1] == json.loads((radar_artifacts / "export.json").read_text())["max_tokens"]


def test_an_ensembles_steps_call_the_models_of_its_own_version(tmp_path, radar_artifacts):
    """Version 1 of `radar` runs version 1 of radar_texts, never "the newest": kit.server.deploy loads a new
    version of radar_texts beside the serving one and checks it before the ensemble points at it."""
    models = build("cpu", tmp_path / "repo", radar_artifacts.parent, specs={})
    steps = models["radar"].config.ensemble_scheduling.step
    assert [(step.model_name, step.model_version) for step in steps] == [("radar_texts", 1)]
    assert (tmp_path / "repo" / "radar" / "1").is_dir()  # Triton loads an ensemble from its version folder


def test_an_ensemble_step_naming_a_model_the_repository_lacks_is_a_clear_error():
    entry = canonical()["radar"].config
    with pytest.raises(RepositoryError, match="radar: its ensemble steps name 'radar_texts', which is not in the repository"):
        pin_steps(entry, 1, {"radar": entry})


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(RepositoryError, match="no profile 'tpu'"):
        plan("tpu")


def test_missing_artifacts_name_the_export_step(tmp_path):
    with pytest.raises(RepositoryError, match="make export"):
        build("cpu", tmp_path / "repo", tmp_path / "no-artifacts", specs={})


def radar_settings(max_chars: int = 300) -> TextSettings:
    return TextSettings(
        classifier="radar_classifier", max_chars=max_chars, max_text_bytes=1024, bucket_count=2, canary_from="export.json"
    )


def export_files(tmp_path, max_chars: int = 300, **sections) -> dict:
    lengths = tmp_path / "token_lengths.json"
    lengths.write_text(json.dumps({"max_chars": max_chars, "max_tokens": 512, "lengths": [10, 40, 80, 300]}))
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"max_tokens": 512, **sections}))
    return {"export.json": path, "token_lengths.json": lengths}


CANARY = {
    "texts": ["Short.", "一段中文。"],
    "scores": [0.25, 0.5],
    "tolerance": 0.001,
    "reference": "PyTorch fp32 (source model)",
}


def test_canary_from_puts_the_exports_golden_set_on_the_settings_as_compact_json(tmp_path):
    derived = derive(radar_settings(), export_files(tmp_path, canary=CANARY))
    assert json.loads(derived.canary) == CANARY
    assert ": " not in derived.canary and derived.canary.isascii()
    assert derived.buckets[-1] == 512


def test_canary_from_adds_nothing_when_the_export_has_no_canary(tmp_path):
    assert derive(radar_settings(), export_files(tmp_path)).canary == ""


def test_canary_from_refuses_a_malformed_golden_set_or_a_text_longer_than_a_chunk(tmp_path):
    with pytest.raises(RepositoryError, match="export.json: the canary has 2 texts and needs as many scores"):
        derive(radar_settings(), export_files(tmp_path, canary={**CANARY, "scores": [0.25]}))
    with pytest.raises(RepositoryError, match="6 characters, over max_chars 5.*--max-chars 5"):
        derive(radar_settings(max_chars=5), export_files(tmp_path, max_chars=5, canary=CANARY))
    with pytest.raises(RepositoryError, match="make export"):
        derive(radar_settings(), {})


def test_the_built_radar_config_carries_the_exports_canary(radar_artifacts):
    section = json.loads((radar_artifacts / "export.json").read_text()).get("canary")
    assert section, "the export wrote no canary: re-run `make export`"
    radar = plan("cpu", specs={})["radar"].written()
    assert radar.parameters["canary_from"].string_value == "export.json"
    assert json.loads(radar.parameters["canary"].string_value) == section


def test_a_model_update_reads_a_text_models_three_models_from_its_entrys_config(tmp_path, radar_artifacts):
    """kit.server.deploy updates any text model that carries a golden set, by its entry's name alone."""
    build("cpu", tmp_path / "repo", radar_artifacts.parent, specs={})
    repo = Repository(tmp_path / "repo", "127.0.0.1:1", None, print)
    try:
        assert TextModels.of(repo, "radar") == TextModels("radar", "radar_texts", "radar_classifier")
        with pytest.raises(DeployError, match="not a text model's entry with a golden set"):
            TextModels.of(repo, "ocr")
        with pytest.raises(DeployError, match="has no model 'nothing'"):
            TextModels.of(repo, "nothing")
    finally:
        repo.close()


def test_a_model_update_started_while_the_server_restarts_waits_for_it(tmp_path, radar_artifacts, monkeypatch):
    """A deploy that begins while a supervisor restarts the server (its connections refused) waits for it to be ready,
    as a roll-back does, and says so when it never is; it failed on the refused connection (a chaos run's broken
    deploy landed in a restart)."""
    monkeypatch.setattr(deploy, "RESTART_TIMEOUT", 1.0)
    build("cpu", tmp_path / "repo", radar_artifacts.parent, specs={})
    with socket.socket() as bound:  # bound, never listening: every connection to it is refused, and nobody can take it
        bound.bind(("127.0.0.1", 0))
        repo = Repository(tmp_path / "repo", f"127.0.0.1:{bound.getsockname()[1]}", None, print)
        try:
            with pytest.raises(DeployError, match="Triton was not ready within 1 s"):
                deploy.deploy(repo, "radar", 2, radar_artifacts)
        finally:
            repo.close()
    assert not (tmp_path / "repo" / "radar" / "2").exists()


def test_a_shipped_spec_whose_export_folder_is_missing_names_the_export_step(tmp_path, radar_artifacts):
    """radar.toml's `source` is its export's folder in the artifacts folder: one the export did not write stops the
    build with what to run. (Not `radar-large`: `make perf` exports that one into the same artifacts folder.)"""
    missing = "radar-never-exported"
    assert not (radar_artifacts.parent / missing).exists()
    source = shutil.copytree(SOURCE, tmp_path / "source", ignore=shutil.ignore_patterns("__pycache__"))
    spec = (source / "radar.toml").read_text()
    (source / "radar.toml").write_text(spec.replace('source = "radar"', f'source = "{missing}"'))
    with pytest.raises(RepositoryError, match=rf"{missing}.*make export"):
        plan("cpu", {}, radar_artifacts.parent, source)


def test_a_second_model_asking_for_the_doors_canary_stops_the_build():
    """The door runs one golden set: two specs with `canary` fail at build time, naming both, not at the door's start."""
    models = plan("cpu", specs={})
    twin = replace(models["radar"], name="twin")
    assert twin.settings.canary_from
    check_one_canary(models)
    with pytest.raises(RepositoryError, match="radar, twin: each asks for the door's canary"):
        check_one_canary({**models, "twin": twin})
