"""The runner's merge-and-split logic, on a real ONNX Runtime session of the exported classifier."""

import json

import numpy as np
import pytest

from kit.adapters.runner import RunnerModel, padded
from kit.adapters.settings import OnnxRunnerSettings
from kit.control.configs import SOURCE
from kit.pipelines.batching.merge import CostModel, Request
from kit.runners.batched import group_by_shape, run_batched
from kit.runners.onnx import OnnxModel
from perf.sim.device import SIM, Curve


@pytest.fixture(scope="module")
def model(radar_artifacts):
    return OnnxModel(radar_artifacts / "model.onnx", threads=1, output_names=["logits"])


def request(rng, batch, length, vocab=200):
    ids = rng.integers(5, vocab, size=(batch, length), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[:, length - 2 :] = 0
    return {"input_ids": ids, "attention_mask": mask}


def test_requests_are_grouped_by_shape_in_order_of_arrival():
    a, b = {"x": np.zeros((1, 4))}, {"x": np.zeros((2, 8))}
    assert group_by_shape([a, b, a, b, a]) == [[0, 2, 4], [1, 3]]


def test_merged_results_equal_each_request_run_alone(model):
    rng = np.random.default_rng(0)
    requests = [request(rng, b, n) for b, n in [(1, 16), (3, 16), (2, 32), (1, 16), (4, 32)]]
    merged = run_batched(model, requests)
    for inputs, result in zip(requests, merged):
        alone = model(inputs)["logits"]
        assert result["logits"].shape == alone.shape
        np.testing.assert_allclose(result["logits"], alone, atol=1e-5)


def test_a_failing_request_fails_alone_and_the_rest_of_its_group_is_answered(model):
    rng = np.random.default_rng(1)
    requests = [request(rng, 1, 16) for _ in range(4)]
    requests[2] = {**requests[2], "input_ids": np.full((1, 16), 10**9, dtype=np.int64)}
    results = run_batched(model, requests)
    assert isinstance(results[2], Exception)
    for i in (0, 1, 3):
        np.testing.assert_allclose(results[i]["logits"], model(requests[i])["logits"], atol=1e-5)


def test_a_plan_that_merges_lengths_pads_them_and_each_request_gets_what_it_gets_alone(model):
    rng = np.random.default_rng(2)
    requests = [request(rng, b, n) for b, n in [(2, 16), (1, 32), (3, 24)]]
    merged = run_batched(model, requests, plan=[[0, 1, 2]], stack=padded)
    for inputs, result in zip(requests, merged):
        np.testing.assert_allclose(result["logits"], model(inputs)["logits"], atol=1e-5)


def runner_args(tmp_path, merge: dict[str, str]) -> tuple[dict, OnnxRunnerSettings]:
    params = {"onnx_model": "model.onnx", "intra_op_threads": "1", **merge}
    (tmp_path / "1").mkdir(parents=True)
    if merge:
        (tmp_path / "1" / "h100.json").symlink_to(SOURCE / "devices" / "h100.json")
    config = {
        "max_batch_size": 64,
        "input": [{"name": "input_ids"}, {"name": "attention_mask"}],
        "output": [{"name": "logits"}],
        "parameters": {key: {"string_value": value} for key, value in params.items()},
    }
    args = {"model_config": json.dumps(config), "model_repository": str(tmp_path), "model_version": "1"}
    return args, OnnxRunnerSettings.from_parameters(params)


def test_priced_by_a_launch_bound_gpu_the_runner_runs_every_length_together_and_without_a_price_apart(tmp_path):
    requests = [Request((length,), 16) for length in (24, 48, 72, 104)]
    priced = RunnerModel()
    args, _ = runner_args(tmp_path / "priced", {})
    priced.plan_runs(args, CostModel.fit(Curve.from_file(SIM / "h100.json", "radar", "fp16").samples()))
    assert priced.planner(requests) == [[0, 1, 2, 3]]  # H100 FP16: ~17 ms a batch of up to 64, whatever its length
    assert priced.planner(requests + [Request((72,), 8)]) != [[0, 1, 2, 3, 4]]  # 72 rows: over max_batch_size
    plain = RunnerModel()
    plain.plan_runs(*runner_args(tmp_path / "plain", {})[:1], None)
    assert plain.planner is None
