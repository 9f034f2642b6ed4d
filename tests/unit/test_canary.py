"""The served-numerics canary without a server: the golden set's parsing, the comparison, the door's
verdict across runs (an incomplete run is no verdict), and readiness and metrics through the door's app
with a stand-in for Triton's client. tests/served/test_canary.py runs it against a real server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math

import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest
from tritonclient.utils import InferenceServerException

from door.app import create_app
from door.canary import Canary
from door.contract import ContractError, contract_from_configs
from door.settings import DoorSettings, SettingsError
from kit.control.canary import CanaryError, GoldenSet, Report, compare, golden_from_parameter, golden_set
from kit.control.configs import set_parameter
from tests.profiles import configs as built_configs
from tests.unit.test_door_app import FakeUpstream, door

SECTION = {"texts": ["One.", "Two."], "scores": [0.1, 0.2], "tolerance": 1e-3, "reference": "PyTorch fp32 (source model)"}
GOLDEN = golden_set(SECTION)


def test_golden_set_reads_the_exports_section():
    assert GOLDEN == GoldenSet(("One.", "Two."), (0.1, 0.2), 1e-3)
    assert golden_from_parameter(json.dumps(SECTION)) == GOLDEN


@pytest.mark.parametrize(
    "change, message",
    [
        ({"texts": []}, "non-empty list"),
        ({"texts": ["One.", ""]}, "non-empty strings"),
        ({"scores": [0.1]}, "2 texts and needs as many scores"),
        ({"scores": [0.1, 1.5]}, r"probabilities in \[0, 1\]"),
        ({"scores": [0.1, True]}, r"probabilities in \[0, 1\]"),
        ({"tolerance": 0}, "positive number"),
        ({"tolerance": "0.001"}, "positive number"),
    ],
)
def test_a_malformed_golden_set_is_a_clear_error(change, message):
    with pytest.raises(CanaryError, match=message):
        golden_set({**SECTION, **change})


def test_a_parameter_that_is_not_a_golden_set_is_a_clear_error():
    with pytest.raises(CanaryError, match="not JSON"):
        golden_from_parameter("{texts")
    with pytest.raises(CanaryError, match=r"has no \['tolerance'\]"):
        golden_from_parameter(json.dumps({"texts": ["a"], "scores": [0.5]}))


def test_drift_within_the_tolerance_passes_and_beyond_it_names_the_worst_text():
    passing = compare(GOLDEN, [0.1004, 0.1999])
    assert passing.ok and passing.max_drift == pytest.approx(4e-4) and passing.worst_text == "One."
    drifting = compare(GOLDEN, [0.1, 0.25])
    assert not drifting.ok and drifting.max_drift == pytest.approx(0.05) and drifting.worst_text == "Two."
    assert drifting.drifts == pytest.approx((0.0, 0.05))


def test_a_nan_score_drifts_without_bound():
    report = compare(GOLDEN, [math.nan, 0.2])
    assert not report.ok and report.max_drift == math.inf and report.worst_text == "One."
    with pytest.raises(ValueError, match="1 served scores for 2 texts"):
        compare(GOLDEN, [0.1])


class Runs:
    """Stands in for door.canary.check: each run answers the next outcome (scores or an exception)."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)

    async def __call__(self) -> Report:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return compare(GOLDEN, outcome)


def metric(registry: CollectorRegistry, line: str) -> float:
    """The value of the sample whose name and labels are `line`."""
    for row in generate_latest(registry).decode().splitlines():
        if row.startswith(line + " "):
            return float(row.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {line}")


def test_an_incomplete_run_is_no_verdict_and_keeps_the_last_one():
    registry = CollectorRegistry()
    down = InferenceServerException("failed to connect", "StatusCode.UNAVAILABLE")
    canary = Canary(GOLDEN, Runs(down, [0.1, 0.2], down, [0.1, 0.3]), 300, registry)

    asyncio.run(canary.run())  # Triton down at the first run: no verdict yet, not ok
    assert not canary.ok and canary.status()["max_drift"] is None and "failed to connect" in canary.status()["error"]
    assert math.isnan(metric(registry, "door_canary_max_drift"))

    asyncio.run(canary.run())
    assert canary.ok and canary.status()["error"] is None and canary.status()["checked_at"]
    assert metric(registry, "door_canary_ok") == 1.0 and metric(registry, "door_canary_max_drift") == 0.0

    asyncio.run(canary.run())  # an error after a pass: still ok, the error reported
    assert canary.ok and "failed to connect" in canary.status()["error"]

    asyncio.run(canary.run())
    status = canary.status()
    assert not canary.ok and status["max_drift"] == pytest.approx(0.1) and status["worst_text"] == "Two."
    assert metric(registry, "door_canary_ok") == 0.0 and metric(registry, "door_canary_max_drift") == pytest.approx(0.1)
    runs = {result: metric(registry, f'door_canary_runs_total{{result="{result}"}}') for result in ("ok", "drift", "error")}
    assert runs == {"ok": 1.0, "drift": 1.0, "error": 2.0}


def test_a_failed_run_is_retried_within_seconds_until_the_first_verdict_then_at_the_interval(monkeypatch):
    monkeypatch.setattr("door.canary.FIRST_RETRY", 0.01)
    registry = CollectorRegistry()
    refused = InferenceServerException("radar: maximum queue size reached", "StatusCode.UNAVAILABLE")
    canary = Canary(GOLDEN, Runs(refused, refused, [0.1, 0.2]), 300, registry)

    async def start_and_watch():
        await canary.run()
        watch = asyncio.create_task(canary.watch())
        await asyncio.sleep(0.5)  # a run beyond the three would find no outcome left and count as an error
        watch.cancel()

    asyncio.run(start_and_watch())
    assert canary.ok
    assert metric(registry, 'door_canary_runs_total{result="error"}') == 2.0
    assert metric(registry, 'door_canary_runs_total{result="ok"}') == 1.0


def test_an_unbounded_drift_reads_as_inf_in_json():
    canary = Canary(GOLDEN, Runs([math.nan, 0.2]), 300, CollectorRegistry())
    asyncio.run(canary.run())
    assert json.loads(json.dumps(canary.status()))["max_drift"] == "inf"


class CanaryUpstream(FakeUpstream):
    """The app tests' fake upstream: radar's SCORE for the canary's requests in turn, then its fixed outputs."""

    scores: list
    canary_models: list

    async def infer(self, model, arrays, request_id=""):
        if not self.scores:
            return await super().infer(model, arrays, request_id)
        self.canary_models.append(model)
        return {"SCORE": np.array([self.scores.pop(0)], np.float32)}


def door_with_canary(contract, scores):
    contract = dataclasses.replace(contract, canary=GOLDEN)
    settings = DoorSettings(coalesce_in_flight=0)  # a request per text, which the fake answers
    upstream = CanaryUpstream(settings, contract)
    upstream.scores, upstream.canary_models = list(scores), []
    return TestClient(create_app(contract, settings, upstream)), upstream


@pytest.fixture(scope="module")
def contract(radar_artifacts):
    return contract_from_configs(built_configs("cpu"))


def test_readiness_and_metrics_report_a_passing_canary(contract):
    test_client, upstream = door_with_canary(contract, [0.1, 0.2])
    with test_client:
        ready = test_client.get("/health/ready")
        metrics = test_client.get("/metrics").text
    assert upstream.canary_models == ["radar", "radar"]
    assert ready.status_code == 200, ready.text
    canary = ready.json()["canary"]
    assert canary["ok"] and canary["max_drift"] < 1e-6 and canary["tolerance"] == 1e-3  # float32 SCOREs
    assert canary["checked_at"] and canary["error"] is None
    assert "door_canary_ok 1.0" in metrics and 'door_canary_runs_total{result="ok"} 1.0' in metrics


def test_a_drifting_canary_fails_readiness_but_not_inference(contract):
    test_client, _ = door_with_canary(contract, [0.1, 0.5])
    with test_client:
        ready = test_client.get("/health/ready")
        answer = test_client.post("/v1/radar", json={"text": "Still served."})
        metrics = test_client.get("/metrics").text
    assert ready.status_code == 503
    canary = ready.json()["canary"]
    assert not canary["ok"] and canary["max_drift"] == pytest.approx(0.3) and canary["worst_text"] == "Two."
    assert answer.status_code == 200
    assert "door_canary_ok 0.0" in metrics and 'door_canary_runs_total{result="drift"} 1.0' in metrics


def test_without_a_golden_set_readiness_reports_no_canary(contract):
    test_client, _ = door(dataclasses.replace(contract, canary=None))
    with test_client:
        ready = test_client.get("/health/ready")
        metrics = test_client.get("/metrics").text
    assert ready.status_code == 200 and ready.json()["canary"] is None
    assert "door_canary" not in metrics


def test_the_door_reads_the_golden_set_from_the_served_radar_config(radar_artifacts):
    configs = built_configs("cpu")
    assert contract_from_configs(configs).canary == golden_from_parameter(configs["radar"].parameters["canary"].string_value)
    set_parameter(configs["radar"], "canary", '{"texts": []}')
    with pytest.raises(ContractError, match="radar: the canary has no"):
        contract_from_configs(configs)
    del configs["radar"].parameters["canary"]
    assert contract_from_configs(configs).canary is None


def test_the_canary_interval_must_be_positive():
    assert DoorSettings().canary_interval == 300.0
    with pytest.raises(SettingsError, match="canary interval"):
        DoorSettings(canary_interval=0)
