"""On the GPU profiles `radar_classifier` has no queue policy of its own (with one, Triton's batcher does not gather
the next batch while the device runs one; docs/RELIABILITY.md): `radar_texts`' window of chunks in flight bounds
what waits for it instead. Checked on the sim-h100 profile, the GPU profiles' layout with a simulated H100 as the
classifier (it computes nothing and answers each batch after the H100's measured time): a burst of texts far
larger than the window ends in right answers or prompt refusals by `radar_texts`' queue, and Triton never holds
more classifier requests than the window's chunks. A window always admits one execution's chunks, and the calls in
flight are capped by the entry's executor threads too, so the test sends a text per execution and raises the threads:
the window alone is what bounds the queue here (lifted, the same burst queued 63 requests)."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from clients.radar import RadarResult, text_tensor
from clients.triton import Endpoint
from kit.control.configs import parse_config
from perf.sim.device import SIM
from samples.texts import sample_texts
from tests.served.pending import sampling_pending
from tests.served.reliability import is_overload, own_server, save_result, tiny_queue

INSTANCES = 2  # radar_texts instances, each with its own window
WINDOW = 8  # chunks each keeps in flight: every classifier request carries at least one
QUEUE = 48  # texts radar_texts holds waiting; the burst is several times that
BURST = 300


def one_chunk_per_request(config) -> None:
    """The classifier takes one chunk per request and per execution, so that without the window the burst's
    chunks would pile up in its queue by the hundred."""
    config.max_batch_size = 1
    config.dynamic_batching.ClearField("preferred_batch_size")


def texts_window(config) -> None:
    tiny_queue(QUEUE, INSTANCES, max_batch=1, window=WINDOW)(config)  # a text per execution: fewer chunks than WINDOW
    config.parameters["max_batch"].string_value = "1"  # the classifier's rows per request, derived at build
    config.parameters["call_threads"].string_value = "64"  # so that the calls in flight are bounded by the window alone


@pytest.fixture(scope="module")
def simulated(tmp_path_factory, radar_artifacts):
    patches = {"radar_texts": texts_window, "radar_classifier": one_chunk_per_request}
    with own_server(tmp_path_factory.mktemp("window-bound"), patches, profile=SIM / "sim-h100.json") as server:
        yield server


async def burst(url: str, texts: list[str]) -> list:
    endpoint = Endpoint(url, "grpc")
    client = endpoint.client(asyncio=True)

    async def one(text):
        start = time.perf_counter()
        try:
            result = await client.infer("radar", endpoint.inputs(text_tensor(text), asyncio=True))
        except InferenceServerException as exc:
            result = exc
        return time.perf_counter() - start, result

    try:
        return await asyncio.gather(*(one(text) for text in texts))
    finally:
        await client.close()


def test_the_window_bounds_a_classifier_without_a_queue_policy(simulated):
    classifier = parse_config((simulated.options.repository / "radar_classifier" / "config.pbtxt").read_text())
    assert not classifier.dynamic_batching.HasField("default_queue_policy"), "the profile under test keeps the policy"
    texts = sample_texts(BURST // 5, 100, 800, seed=44)
    url = simulated.options.grpc_url
    alone = {text: RadarResult.from_response(asyncio.run(burst(url, [text]))[0][1]) for text in texts}  # nothing else in flight
    sent = texts * 5
    with sampling_pending(simulated.options.metrics_url) as pending:
        results = asyncio.run(burst(url, sent))
    answered = 0
    for text, (seconds, result) in zip(sent, results):
        if isinstance(result, Exception):
            assert is_overload(result), result
            assert seconds < 2.0, f"a refusal took {seconds:.2f} s"
            continue
        answered += 1
        got, expected = RadarResult.from_response(result), alone[text]
        assert got.chunk_spans == expected.chunk_spans
        np.testing.assert_allclose(got.chunk_scores, expected.chunk_scores, atol=1e-6, rtol=0)
    assert 0 < answered < BURST, f"{answered} of {BURST} answered: the burst did not overflow radar_texts' queue"
    save_result(
        "window_bound", {"burst": BURST, "answered": answered, "window": WINDOW, "instances": INSTANCES, "peak": pending.peak}
    )
    assert pending.scrapes > 2
    assert pending.peak["radar_texts"] > INSTANCES * WINDOW, "the burst never waited upstream of the window"
    assert pending.peak["radar_classifier"] <= INSTANCES * WINDOW, pending.peak
