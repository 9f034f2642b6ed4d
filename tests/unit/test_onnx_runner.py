"""The runner's merge-and-split logic, on a real ONNX Runtime session of the exported classifier."""

import numpy as np
import pytest

from kit.runners.batched import group_by_shape, run_batched
from kit.runners.onnx import OnnxModel


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
