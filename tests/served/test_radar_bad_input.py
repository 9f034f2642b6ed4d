"""Bad requests to RADAR fail alone with a clear message; good requests beside them still succeed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from clients.radar import RadarClient
from clients.triton import Endpoint
from samples.texts import sample_texts

BAD_TEXTS = {
    "empty": (b"", "empty"),
    "whitespace": (b" \n\t  ", "whitespace"),
    "invalid utf-8": (b"valid start \xff\xfe then garbage", "UTF-8"),
    "over 1 MiB": (b"a" * (1024 * 1024 + 1), "maximum"),
}


@pytest.mark.parametrize("case", list(BAD_TEXTS))
def test_bad_text_gets_a_clear_error(url, protocol, case):
    raw, expected = BAD_TEXTS[case]
    client = RadarClient(url, protocol)
    with pytest.raises(InferenceServerException) as error:
        client.classify(raw)
    assert expected in error.value.message()
    client.close()


def send(url, protocol, arrays):
    endpoint = Endpoint(url, protocol)
    client = endpoint.client()
    try:
        return client.infer("radar", endpoint.inputs(arrays))
    finally:
        client.close()


def test_wrong_dtype_is_rejected_by_name(url, protocol):
    with pytest.raises(InferenceServerException) as error:
        send(url, protocol, {"TEXT": np.array([1], dtype=np.int32)})
    assert "TEXT" in error.value.message() and "INT32" in error.value.message()


def test_wrong_shape_is_rejected_by_name(url, protocol):
    # TEXT is [t], one text or several (what the door coalesces): a second axis is the wrong shape.
    with pytest.raises(InferenceServerException) as error:
        send(url, protocol, {"TEXT": np.array([[b"one", b"two"]], dtype=np.object_)})
    assert "TEXT" in error.value.message()


def test_bad_classifier_request_fails_alone_within_a_merged_batch(grpc_client):
    """Token ids outside the vocabulary break the ONNX run; only that request may fail."""
    endpoint = Endpoint("unused", "grpc")
    good = np.full((1, 16), 5, dtype=np.int64)
    bad = np.full((1, 16), 10**9, dtype=np.int64)

    def call(ids):
        inputs = endpoint.inputs({"input_ids": ids, "attention_mask": np.ones_like(ids)})
        try:
            return grpc_client.infer("radar_classifier", inputs).as_numpy("logits")
        except InferenceServerException as exc:
            return exc

    batch = [bad if i % 8 == 3 else good for i in range(32)]
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(call, batch))
    expected = results[0]
    for ids, result in zip(batch, results):
        if ids is bad:
            assert isinstance(result, InferenceServerException)
        else:
            assert not isinstance(result, Exception), result
            np.testing.assert_allclose(result, expected, atol=1e-5)


def test_bad_requests_do_not_fail_good_ones_and_server_stays_ready(server, url, protocol, reference):
    good = sample_texts(12, 100, 800, seed=23)
    bad = [raw for raw, _ in BAD_TEXTS.values()] * 3
    mixed = [t for pair in zip(good, bad) for t in pair]
    client = RadarClient(url, protocol, concurrency=24)
    results = client.classify_many(mixed)
    client.close()
    for request, result in zip(mixed, results):
        if isinstance(request, bytes):
            assert isinstance(result, InferenceServerException)
        else:
            assert not isinstance(result, Exception), result
            expected = [reference(request[s:e]) for s, e in result.chunk_spans]
            np.testing.assert_allclose(result.chunk_scores, expected, atol=1e-4, rtol=0)
    assert server.is_ready()
    assert grpcclient.InferenceServerClient(server.options.grpc_url).is_model_ready("radar")
