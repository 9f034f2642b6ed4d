"""Overload: a full queue refuses at once with a status a client can act on (gRPC UNAVAILABLE / HTTP
503), the kit's clients retry it with backoff until they get the right answer, and bad input is
never retried. Runs on a server of its own whose queues are made tiny by patching the built configs."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import onnxruntime as ort
import pytest
from tritonclient.utils import InferenceServerException

from clients.radar import RadarClient, text_tensor
from clients.triton import Endpoint, RetryPolicy, is_retryable
from kit.control.configs import parse_config
from samples.texts import sample_texts
from tests.served.reliability import is_overload, own_server, save_result, tiny_queue
from tests.served.test_radar import assert_matches_reference

OVERLOAD_STATUSES = {"StatusCode.UNAVAILABLE", "503"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, radar_artifacts):
    # The classifier's queue must hold the fan-out of the chunks radar_texts keeps in flight (a window of 4: at
    # most 4 requests), or a text could never be answered, however often it is retried; the texts beyond the
    # window wait in radar_texts' own queue of 4, which is what overflows.
    patches = {"radar_texts": tiny_queue(4, 2, max_batch=1, window=4), "radar_classifier": tiny_queue(8, 1)}
    with own_server(tmp_path_factory.mktemp("tiny-queue"), patches) as server:
        yield server


def classifier_rows(server) -> int:
    """The most rows one request to the served classifier may carry (the CPU profile caps the source's)."""
    return parse_config((server.options.repository / "radar_classifier" / "config.pbtxt").read_text()).max_batch_size


def url_of(server, protocol):
    return server.options.grpc_url if protocol == "grpc" else server.options.http_url


async def flood(server, protocol, model, arrays, count):
    """`count` identical requests at once; each ends as (seconds, response or exception)."""
    endpoint = Endpoint(url_of(server, protocol), protocol)
    client = endpoint.client(asyncio=True)

    async def one():
        start = time.perf_counter()
        try:
            result = await client.infer(model, endpoint.inputs(arrays, asyncio=True))
        except InferenceServerException as exc:
            result = exc
        return time.perf_counter() - start, result

    try:
        return await asyncio.gather(*(one() for _ in range(count)))
    finally:
        await client.close()


def assert_refused_as_overload(results, prompt_s=2.0):
    refused = [(s, r) for s, r in results if isinstance(r, Exception)]
    assert refused, "the tiny queue refused nothing: the flood did not overload it"
    for seconds, exc in refused:
        assert exc.status() in OVERLOAD_STATUSES and "maximum queue size" in exc.message(), exc
        assert is_overload(exc)
        assert seconds < prompt_s, f"a refusal took {seconds:.2f} s"
    return len(refused)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_full_classifier_queue_is_refused_at_once_and_served_answers_are_right(tiny, radar_artifacts, protocol):
    ids = np.random.default_rng(0).integers(5, 200, size=(classifier_rows(tiny), 256), dtype=np.int64)
    arrays = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    results = asyncio.run(flood(tiny, protocol, "radar_classifier", arrays, 40))
    assert_refused_as_overload(results)
    session = ort.InferenceSession(str(radar_artifacts / "model.onnx"), providers=["CPUExecutionProvider"])
    (expected,) = session.run(["logits"], arrays)
    for _, response in results:
        if not isinstance(response, Exception):
            np.testing.assert_allclose(response.as_numpy("logits"), expected, atol=1e-4)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_full_radar_queue_is_refused_at_once_with_unavailable_or_503(tiny, protocol):
    text = sample_texts(1, 250, 290, seed=31)[0]  # one chunk: radar_texts' queue refuses, not the classifier's
    results = asyncio.run(flood(tiny, protocol, "radar", text_tensor(text), 40))
    refused = assert_refused_as_overload(results)
    assert any(not isinstance(r, Exception) for _, r in results)
    save_result(
        f"overload_radar_{protocol}",
        {
            "requests": 40,
            "queue": 4,
            "instances": 2,
            "refused": refused,
            "slowest_refusal_s": round(max(s for s, r in results if isinstance(r, Exception)), 3),
            "slowest_answer_s": round(max(s for s, r in results if not isinstance(r, Exception)), 3),
        },
    )


def test_request_that_waits_past_its_queue_timeout_is_refused_as_unavailable(tiny):
    """allow_timeout_override lets a client ask for a shorter wait (here 1 ms, in microseconds)."""
    ids = np.full((classifier_rows(tiny), 512), 7, dtype=np.int64)
    endpoint = Endpoint(tiny.options.grpc_url, "grpc")

    async def run():
        client = endpoint.client(asyncio=True)
        inputs = endpoint.inputs({"input_ids": ids, "attention_mask": np.ones_like(ids)}, asyncio=True)

        async def one():
            try:
                return await client.infer("radar_classifier", inputs, timeout=1000)
            except InferenceServerException as exc:
                return exc

        try:
            return await asyncio.gather(*(one() for _ in range(8)))
        finally:
            await client.close()

    results = asyncio.run(run())
    expired = [r for r in results if isinstance(r, Exception) and "timeout expired" in r.message()]
    assert expired, f"no request expired in the queue: {results}"
    assert all(r.status() == "StatusCode.UNAVAILABLE" and is_retryable(r) for r in expired)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_retrying_client_gets_every_answer_right_through_a_full_queue(tiny, protocol, reference):
    texts = sample_texts(32, 300, 900, seed=37)
    client = RadarClient(url_of(tiny, protocol), protocol, concurrency=32, retry=RetryPolicy(attempts=30, cap=1.0))
    results = client.classify_many(texts)
    client.close()
    for text, result in zip(texts, results):
        assert not isinstance(result, Exception), str(result)
        assert_matches_reference(text, result, reference)
    assert client.retries.count > 0, "nothing was refused, so nothing was retried: the test did not overload"


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_bad_input_is_not_retried(tiny, protocol):
    client = RadarClient(url_of(tiny, protocol), protocol)
    with pytest.raises(InferenceServerException) as error:
        client.classify(b"\xff\xfe not UTF-8")
    client.close()
    assert "UTF-8" in error.value.message()
    assert client.retries.count == 0
