"""A run on one of the export's graphs compares equal work: the kit, a baseline and the limit run the ONNX file the
spec names (the kit's profile setting `graph`, the limit's and a baseline's `graph`). Checked on the resolved
configs and environments, without starting a server."""

import json
from pathlib import Path

import pytest

from kit.control.configs import parameters
from perf.baselines.radar_model import logits_from_env
from perf.engine.spec import load_spec
from perf.engine.targets import make_target, variant_models
from perf.workloads.radar import RADAR

GRAPH = "model.fused.onnx"


@pytest.fixture
def graphs_folder(radar_artifacts: Path, tmp_path) -> Path:
    """The tiny export, with the fused and INT8 graphs (each a link to its model.onnx)."""
    folder = tmp_path / "radar"
    folder.mkdir()
    for name in ("model.onnx", "tokenizer.json", "export.json", "token_lengths.json"):
        (folder / name).symlink_to(radar_artifacts / name)
    for name in (GRAPH, "model.int8.onnx", "model.cpu.onnx"):
        (folder / name).symlink_to(radar_artifacts / "model.onnx")
    return folder


def test_kit_baseline_and_limit_run_the_graph_the_spec_names(graphs_folder, tmp_path):
    spec = load_spec("kit-vs-limit")
    kit = make_target(RADAR, "kit", spec["targets"]["kit"][0], graphs_folder, tmp_path)
    served = parameters(variant_models(RADAR, kit.setting, graphs_folder, tmp_path / "kit")["radar_classifier"].written())
    baseline = make_target(RADAR, "uvicorn", {"workers": 2, "graph": GRAPH}, graphs_folder, tmp_path)
    limit = RADAR.served(graphs_folder, tmp_path / "limit", RADAR.graph_variant(spec["limit"]))[1]["onnx_model"]
    assert served["onnx_model"] == baseline.environment()["RADAR_GRAPH"] == limit == GRAPH
    assert kit.placements["radar_texts"]["default_timeout_microseconds"] == 600_000_000  # the spec's own settings stay


def test_baselines_load_the_graph_their_environment_names(graphs_folder, monkeypatch):
    monkeypatch.setenv("RADAR_GRAPH", "model.int8.onnx")
    assert logits_from_env(graphs_folder) is not None
    monkeypatch.setenv("RADAR_GRAPH", "model.absent.onnx")
    with pytest.raises(Exception, match="model.absent.onnx"):
        logits_from_env(graphs_folder)


def test_a_spec_that_asks_for_a_run_per_graph_is_refused_with_what_to_do_instead(tmp_path):
    path = tmp_path / "graphs.json"
    path.write_text(json.dumps({"extends": "kit-vs-limit", "graphs": {"fp32": "model.onnx"}}))
    with pytest.raises(ValueError, match="`graphs`.*name one file"):
        load_spec(str(path))
