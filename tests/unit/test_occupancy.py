"""perf.probes.occupancy's reading of Triton request traces: executions, busy share and stalls."""

import json

import pytest

from perf.probes.occupancy import occupancy, traced_requests

MS = 1_000_000  # traces are in ns


def request(queued: float, start: float, end: float) -> dict[str, int]:
    return {"QUEUE_START": int(queued * MS), "COMPUTE_START": int(start * MS), "COMPUTE_END": int(end * MS)}


def test_one_instance_idle_while_a_request_waits_is_a_stall():
    # A runs 0-10 ms; B waits from 2 ms but only starts at 15 ms, batched with C: 5 ms of stall.
    o = occupancy([request(0, 0, 10), request(2, 15, 20), request(15, 15, 20)], instances=1)
    assert (o.requests, o.executions, o.requests_per_execution) == (3, 2, 1.5)
    assert o.window_s == pytest.approx(0.020)
    assert o.busy_per_instance == pytest.approx(15 / 20)
    assert o.stalled_s == pytest.approx(0.005) and o.longest_stall_ms == pytest.approx(5)
    assert o.stalled_share == pytest.approx(5 / 20)


def test_with_two_instances_a_stall_needs_a_free_instance_and_a_waiting_request():
    # 0-1 ms: one instance runs, B waits (stall 1 ms); 1-10 ms: both run while C waits (no stall);
    # 10-12 ms: both idle, C waits (stall 2 ms); C runs 12-14 ms with nothing queued.
    o = occupancy([request(0, 0, 10), request(0, 1, 10), request(2, 12, 14)], instances=2)
    assert o.executions == 3
    assert o.busy_per_instance == pytest.approx((10 + 9 + 2) / 2 / 14)
    assert o.stalled_s == pytest.approx(0.003) and o.longest_stall_ms == pytest.approx(2)


def test_no_waiting_request_means_no_stall_however_idle():
    o = occupancy([request(0, 0, 1), request(50, 50, 51)], instances=1)
    assert o.stalled_s == 0 and o.busy_per_instance == pytest.approx(2 / 51)


def test_trace_pieces_are_merged_by_id_and_other_models_left_out(tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text(
        json.dumps(
            [
                {"id": 1, "model_name": "radar_classifier", "model_version": 1},
                {"id": 1, "timestamps": [{"name": "QUEUE_START", "ns": 5}, {"name": "COMPUTE_START", "ns": 7}]},
                {"id": 1, "timestamps": [{"name": "COMPUTE_END", "ns": 9}]},
                {
                    "id": 2,
                    "model_name": "radar",
                    "timestamps": [
                        {"name": "QUEUE_START", "ns": 1},
                        {"name": "COMPUTE_START", "ns": 2},
                        {"name": "COMPUTE_END", "ns": 20},
                    ],
                },
                {"id": 3, "model_name": "radar_classifier", "timestamps": [{"name": "QUEUE_START", "ns": 3}]},  # never ran
            ]
        )
    )
    assert traced_requests(trace, "radar_classifier") == [{"QUEUE_START": 5, "COMPUTE_START": 7, "COMPUTE_END": 9}]


def test_no_traced_request_is_an_error():
    with pytest.raises(ValueError, match="no traced request"):
        occupancy([], instances=1)
