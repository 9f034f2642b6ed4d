"""resnet50 on a real server: concurrent images of different shapes are merged into padded batches,
and every request gets what the model computes on its image alone, unpadded."""

from __future__ import annotations

import re
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.conftest import ARTIFACTS
from tests.served.reliability import own_server

# Served PROBS vs direct ONNX Runtime inference of the image alone: padding changes nothing but
# float rounding (measured: <= 4e-9 absolute, 1e-6 relative; see README).
RTOL, ATOL = 1e-4, 1e-7
SHAPES = [(40, 52), (48, 48), (33, 64), (40, 52), (64, 31), (1, 1), (57, 40)]


@pytest.fixture(scope="module")
def direct():
    """The exported backbone run on one unpadded image at a time: no merging, no padding."""
    path = ARTIFACTS / "resnet50" / "model.onnx"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make export` (make test does it)")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def probs(images: np.ndarray) -> np.ndarray:
        sizes = np.array([images.shape[2:]] * len(images), dtype=np.int64)
        return session.run(["probs"], {"pixel_values": images, "image_sizes": sizes})[0]

    return probs


def images(shapes, count=1, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((count, 3, h, w), dtype=np.float32) for h, w in shapes]


def classify(url, protocol, batch):
    module = grpcclient if protocol == "grpc" else httpclient
    client = module.InferenceServerClient(url)
    infer_input = module.InferInput("INPUT", list(batch.shape), "FP32")
    infer_input.set_data_from_numpy(batch)
    try:
        return client.infer("resnet50", [infer_input]).as_numpy("PROBS")
    except InferenceServerException as exc:
        return exc
    finally:
        client.close()


def classify_all(url, protocol, batches):
    """All requests in flight at once, so the dynamic batcher can hand them over together."""
    with ThreadPoolExecutor(len(batches)) as pool:
        return list(pool.map(lambda batch: classify(url, protocol, batch), batches))


def test_concurrent_images_of_different_shapes_equal_direct_unpadded_inference(url, protocol, direct):
    batches = images(SHAPES)
    for batch, probs in zip(batches, classify_all(url, protocol, batches)):
        assert not isinstance(probs, Exception), probs
        assert probs.shape == (1, 1000)
        np.testing.assert_allclose(probs, direct(batch), rtol=RTOL, atol=ATOL)


def test_a_request_of_several_images_gets_one_row_each(server, direct):
    batches = images([(36, 44), (36, 44)], count=3, seed=1) + images([(50, 20)], seed=2)
    results = classify_all(server.options.grpc_url, "grpc", batches)
    for batch, probs in zip(batches, results):
        assert probs.shape == (len(batch), 1000)
        np.testing.assert_allclose(probs, direct(batch), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_bad_images_fail_alone_with_a_reason_and_the_others_are_answered(server, protocol, direct):
    url = server.options.grpc_url if protocol == "grpc" else server.options.http_url
    good = images([(30, 40), (41, 29)], seed=3)
    nan = np.zeros((1, 3, 16, 16), dtype=np.float32)
    nan[0, 1, 3, 4] = np.nan
    bad = {
        "empty dimension": np.zeros((1, 3, 0, 12), dtype=np.float32),
        "exceeds the limit of 1048576": np.zeros((1, 3, 1025, 1024), dtype=np.float32),
        "NaN or infinite": nan,
        "unexpected shape": np.zeros((1, 3, 8), dtype=np.float32),  # refused by Triton itself
    }
    results = classify_all(url, protocol, [good[0], *bad.values(), good[1]])
    for message, result in zip(bad, results[1:-1]):
        assert isinstance(result, InferenceServerException), message
        assert result.status() in {"StatusCode.INVALID_ARGUMENT", "400"} and message in result.message()
    for batch, probs in zip(good, [results[0], results[-1]]):
        np.testing.assert_allclose(probs, direct(batch), rtol=RTOL, atol=ATOL)
    assert server.is_ready()


def padding_counters(metrics_url: str) -> dict[str, float]:
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    found = re.findall(r"^(padded_batch_\w+)\{([^}]*)\} (\S+)$", text, re.M)
    return {f"{name}{{{labels}}}": float(value) for name, labels, value in found}


@pytest.fixture(scope="module")
def paddle_server(tmp_path_factory):
    """resnet50 alone under Paddle's rule, waiting up to 200 ms for a batch to fill, so that
    requests sent together are handed over together whatever the machine's load."""

    def change(config):
        config.parameters["merge_policy"].string_value = "paddle"
        config.dynamic_batching.max_queue_delay_microseconds = 200_000

    root = tmp_path_factory.mktemp("resnet-paddle")
    with own_server(root, {"resnet50": change}, models=("resnet50", "resnet50_backbone")) as server:
        yield server


def test_requests_of_different_shapes_run_as_one_padded_batch(paddle_server, direct):
    batches = images(SHAPES[:5], seed=4)
    results = classify_all(paddle_server.options.grpc_url, "grpc", batches)
    for batch, probs in zip(batches, results):
        np.testing.assert_allclose(probs, direct(batch), rtol=RTOL, atol=ATOL)
    client = grpcclient.InferenceServerClient(paddle_server.options.grpc_url)
    stats = client.get_inference_statistics("resnet50_backbone", as_json=True)["model_stats"][0]
    client.close()
    assert int(stats["inference_count"]) == len(batches)
    assert int(stats["execution_count"]) < len(batches)
    counters = padding_counters(paddle_server.options.metrics_url)
    assert counters['padded_batch_runs{model="resnet50",shapes="mixed"}'] >= 1
    assert counters['padded_batch_items{model="resnet50"}'] == len(batches)
    valid = counters['padded_batch_elements{kind="valid",model="resnet50"}']
    assert valid == sum(b.size for b in batches)
    assert counters['padded_batch_elements{kind="padding",model="resnet50"}'] > 0
