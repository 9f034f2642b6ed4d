"""The served-numerics canary on real servers: the export's golden set passes through the session's
server, and a server whose classifier graph is deliberately perturbed fails the door's readiness with
the drift reported, while inference still answers (the canary reports, it does not block traffic)."""

from __future__ import annotations

import json

from perf.chaos.versions import perturbed_export
from tests.served.doors import call, metrics, running_door
from tests.served.reliability import own_server, wait_for


def test_the_exports_golden_set_passes_on_the_served_model_at_start_and_every_interval(server, tmp_path, radar_artifacts):
    tolerance = json.loads((radar_artifacts / "export.json").read_text())["canary"]["tolerance"]
    with running_door(server.options.grpc_url, tmp_path / "door.log", "--canary-interval", "0.5") as door:
        ready = call(door, "GET", "/health/ready")
        assert ready.status == 200, ready.data
        canary = ready.json()["canary"]
        assert canary["ok"] and canary["max_drift"] <= tolerance == canary["tolerance"] and canary["error"] is None
        assert wait_for(lambda: metrics(door)['door_canary_runs_total{result="ok"}'] >= 2, 20, every=0.2), metrics(door)
        sample = metrics(door)
    assert sample["door_canary_ok"] == 1.0 and sample["door_canary_max_drift"] <= tolerance
    assert sample['door_canary_runs_total{result="drift"}'] == 0 and sample['door_canary_runs_total{result="error"}'] == 0


def test_a_perturbed_classifier_fails_readiness_with_the_drift_while_inference_still_answers(tmp_path, radar_artifacts):
    tolerance = json.loads((radar_artifacts / "export.json").read_text())["canary"]["tolerance"]
    artifacts = perturbed_export(tmp_path / "artifacts")
    with (
        own_server(tmp_path, artifacts=artifacts) as server,
        running_door(server.options.grpc_url, tmp_path / "door.log") as door,
    ):
        ready = call(door, "GET", "/health/ready")
        answer = call(door, "POST", "/v1/radar", json={"text": "Still answered while the canary drifts."})
        sample = metrics(door)
    assert ready.status == 503, ready.data
    body = ready.json()
    assert body["triton"] and all(body["models"].values()), "only the canary is not ready"
    assert not body["canary"]["ok"] and body["canary"]["max_drift"] > 10 * tolerance and body["canary"]["worst_text"]
    assert answer.status == 200 and 0 <= answer.json()["score"] <= 1
    assert sample["door_canary_ok"] == 0.0 and sample["door_canary_max_drift"] == body["canary"]["max_drift"]
    assert sample['door_canary_runs_total{result="drift"}'] == 1
