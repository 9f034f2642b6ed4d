"""Overload: a full queue refuses at once with a status a client can act on (gRPC UNAVAILABLE / HTTP 503), the kit's
clients retry it with backoff until they get the right answer, and bad input is never retried. Runs on a server of its
own where each radar model is reached through a gate (tests.served.gate) with a tiny queue: a closed gate holds its
model busy, so its queue is full by construction and what is refused is known, however loaded the machine."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest
from tritonclient.utils import InferenceServerException

from clients.base import ModelClient
from clients.radar import RadarClient
from clients.triton import NO_RETRY, RetryPolicy, is_retryable
from kit.control.configs import parse_config
from samples.texts import sample_texts
from tests.served.gate import WAIT_S, Gate
from tests.served.reliability import is_overload, own_server, save_result, wait_for
from tests.served.test_radar import assert_matches_reference

OVERLOAD_STATUSES = {"StatusCode.UNAVAILABLE", "503"}
EXTRA = 8  # requests sent once a queue is full: each must be refused
TEXTS_GATE = Gate("radar_texts", queue=4)  # radar's ensemble step, where texts wait
CLASSIFIER_GATE = Gate("radar_classifier", queue=8)  # what radar_texts calls


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, radar_artifacts):
    patches = {"radar": TEXTS_GATE.as_step, "radar_texts": CLASSIFIER_GATE.as_parameter("classifier")}
    with own_server(tmp_path_factory.mktemp("gated"), patches, gates=[TEXTS_GATE, CLASSIFIER_GATE]) as server:
        yield server


def url_of(server, protocol):
    return server.options.grpc_url if protocol == "grpc" else server.options.http_url


def outcome(call):
    """The answer of `call()`, or the refusal it raised."""
    try:
        return call()
    except InferenceServerException as exc:
        return exc


def assert_refused_as_overload(refusals) -> None:
    for exc in refusals:
        assert isinstance(exc, InferenceServerException), exc
        assert exc.status() in OVERLOAD_STATUSES and "maximum queue size" in exc.message(), exc
        assert is_overload(exc)


def overflow(server, gate: Gate, send) -> tuple[list, list]:
    """Fill the closed `gate` (one request held, its queue full), then send EXTRA more: (the held requests' outcomes
    once the gate opens, the extras' outcomes, all in before it opened)."""
    with ThreadPoolExecutor(gate.queue + 1 + EXTRA) as pool:
        with gate.closed():
            held = gate.fill(server, pool, lambda: outcome(send))
            extras = list(pool.map(lambda _: outcome(send), range(EXTRA)))
            assert not any(future.done() for future in held), "a held request ended while the gate was closed"
        return [future.result() for future in held], extras


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_full_classifier_queue_is_refused_at_once_and_held_answers_are_right(tiny, radar_artifacts, protocol):
    rows = parse_config((tiny.options.repository / "radar_classifier" / "config.pbtxt").read_text()).max_batch_size
    ids = np.random.default_rng(0).integers(5, 200, size=(rows, 256), dtype=np.int64)
    arrays = {"input_ids": ids, "attention_mask": np.ones_like(ids)}  # a full batch: one request per execution
    client = ModelClient(CLASSIFIER_GATE.name, ["logits"], url_of(tiny, protocol), protocol, retry=NO_RETRY)
    try:
        held, extras = overflow(tiny, CLASSIFIER_GATE, lambda: client.infer(arrays))
    finally:
        client.close()
    assert_refused_as_overload(extras)
    session = ort.InferenceSession(str(radar_artifacts / "model.onnx"), providers=["CPUExecutionProvider"])
    (expected,) = session.run(["logits"], arrays)
    for answer in held:
        assert not isinstance(answer, Exception), answer
        np.testing.assert_allclose(answer["logits"], expected, atol=1e-4)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_full_radar_queue_is_refused_at_once_with_unavailable_or_503(tiny, protocol, reference):
    text = sample_texts(1, 250, 290, seed=31)[0]
    client = RadarClient(url_of(tiny, protocol), protocol, retry=NO_RETRY)
    try:
        start = time.perf_counter()
        held, extras = overflow(tiny, TEXTS_GATE, lambda: client.classify(text))
        seconds = time.perf_counter() - start
    finally:
        client.close()
    assert_refused_as_overload(extras)  # relayed by the ensemble `radar` from its step's queue
    for result in held:
        assert not isinstance(result, Exception), result
        assert_matches_reference(text, result, reference)
    save_result(
        f"overload_radar_{protocol}",
        {"held": len(held), "queue": TEXTS_GATE.queue, "refused": len(extras), "seconds": round(seconds, 2)},
    )


def test_request_that_waits_past_its_queue_timeout_is_refused_as_unavailable(tiny):
    """allow_timeout_override lets a client ask for a shorter wait (here 1 ms, in microseconds): the request waits
    behind one held by the closed gate for longer than that, so it expires, whenever Triton checks it."""
    rows = parse_config((tiny.options.repository / "radar_classifier" / "config.pbtxt").read_text()).max_batch_size
    ids = np.full((rows, 512), 7, dtype=np.int64)
    arrays = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    client = ModelClient(CLASSIFIER_GATE.name, ["logits"], tiny.options.grpc_url, retry=NO_RETRY)
    request = client.endpoint.inputs(arrays)
    with ThreadPoolExecutor(2) as pool:
        with CLASSIFIER_GATE.closed():
            first = CLASSIFIER_GATE.arrived() + 1
            held = pool.submit(client.infer, arrays)
            assert wait_for(lambda: CLASSIFIER_GATE.arrived() == first, WAIT_S)
            timed = pool.submit(outcome, lambda: client.clients.get().infer(CLASSIFIER_GATE.name, request, timeout=1000))
            assert wait_for(lambda: CLASSIFIER_GATE.pending(tiny) == 1 or timed.done(), WAIT_S, every=0.05)
            time.sleep(0.01)  # past its 1 ms whatever happens: the instance it waits for is held
        expired = timed.result()
        held.result()
    client.close()
    assert isinstance(expired, InferenceServerException) and "timeout expired" in expired.message(), expired
    assert expired.status() == "StatusCode.UNAVAILABLE" and is_retryable(expired)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_retrying_client_gets_every_answer_right_through_a_full_queue(tiny, protocol, reference):
    """The queue is full while the client starts, so its first tries are refused; the gate opens once it has retried."""
    texts = sample_texts(32, 300, 900, seed=37)
    plain = RadarClient(url_of(tiny, protocol), protocol, retry=NO_RETRY)
    client = RadarClient(url_of(tiny, protocol), protocol, concurrency=32, retry=RetryPolicy(attempts=60, cap=1.0))
    results: list = []
    with ThreadPoolExecutor(TEXTS_GATE.queue + 1) as pool:
        with TEXTS_GATE.closed():
            held = TEXTS_GATE.fill(tiny, pool, lambda: plain.classify(texts[0]))
            retrying = threading.Thread(target=lambda: results.extend(client.classify_many(texts)))
            retrying.start()
            assert wait_for(lambda: client.retries.count > 0, WAIT_S), "the full queue refused nothing"
        retrying.join()
        for future in held:
            assert_matches_reference(texts[0], future.result(), reference)
    plain.close()
    client.close()
    for text, result in zip(texts, results, strict=True):
        assert not isinstance(result, Exception), str(result)
        assert_matches_reference(text, result, reference)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_bad_input_is_not_retried(tiny, protocol):
    client = RadarClient(url_of(tiny, protocol), protocol)
    with pytest.raises(InferenceServerException) as error:
        client.classify(b"\xff\xfe not UTF-8")
    client.close()
    assert "UTF-8" in error.value.message()
    assert client.retries.count == 0
