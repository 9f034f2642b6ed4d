"""RADAR exported with --precision int8 (the tiny stand-in, artifacts/radar-int8), served end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clients.radar import RadarClient
from kit.control.configs import parse_config
from tests.conftest import ARTIFACTS
from tests.radar_reference import direct_scorer
from tests.served.reliability import own_server

INT8 = ARTIFACTS / "radar-int8"


@pytest.fixture(scope="module")
def int8_server(tmp_path_factory):
    if not (INT8 / "export.json").is_file():
        pytest.fail(f"{INT8} has no INT8 export: run `make test` (it exports the tiny stand-in with --precision int8)")
    root = tmp_path_factory.mktemp("int8")
    (root / "artifacts").mkdir()
    (root / "artifacts" / "radar").symlink_to(INT8)
    with own_server(root, artifacts=root / "artifacts") as server:
        yield root / "repository", server


def test_the_cpu_profile_serves_the_int8_graph_the_export_chose(int8_server):
    repository, _ = int8_server
    config = parse_config((repository / "radar_classifier" / "config.pbtxt").read_text())
    served = repository / "radar_classifier" / "1" / config.parameters["onnx_model"].string_value
    assert served.samefile(INT8 / "model.int8.onnx")


def test_served_int8_scores_stay_within_the_exports_tolerance_of_the_source_model(int8_server):
    _, server = int8_server
    canary = json.loads((INT8 / "export.json").read_text())["canary"]
    results = RadarClient(server.options.grpc_url).classify_many(canary["texts"])
    served = np.array([result.score for result in results])
    drift = np.abs(served - np.array(canary["scores"]))
    assert drift.max() <= canary["tolerance"], f"served INT8 drifts {drift.max():.4g} from PyTorch FP32"
    # It is INT8 that answered: the FP32 graph would match the source to 1e-5.
    fp32 = direct_scorer(INT8)
    assert np.abs(served - np.array([fp32(text) for text in canary["texts"]])).max() > 1e-4
