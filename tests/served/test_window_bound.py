"""On the GPU profiles `radar_classifier` has no queue policy of its own (with one, Triton's batcher does not gather
the next batch while the device runs one; docs/RELIABILITY.md): `radar_texts`' window of chunks in flight bounds
what waits for it instead. Checked on the sim-h100 profile, the GPU profiles' layout with a simulated H100 as the
classifier (it computes nothing and answers each batch after the H100's measured time), reached through a gate that
keeps its policy, or lack of one (tests.served.gate): while the gate holds the classifier busy, a burst of texts far
larger than the window fills `radar_texts`' queue and the rest is refused, by construction, and Triton holds no more
classifier requests than the windows' chunks; once it opens, every held text is answered right. A window always
admits one execution's chunks, and the calls in flight are capped by the entry's executor threads too, so the test
sends a text per execution and raises the threads: the window alone is what bounds the queue here (lifted, the same
burst queued 63 requests)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from clients.radar import RadarResult, text_tensor
from clients.triton import Endpoint
from kit.control.configs import parse_config
from perf.sim.device import SIM
from samples.texts import sample_texts
from tests.served.gate import WAIT_S, Gate
from tests.served.reliability import is_overload, own_server, save_result, tiny_queue, wait_for

INSTANCES = 2  # radar_texts instances, each with its own window
WINDOW = 8  # chunks each keeps in flight: every classifier request carries at least one
QUEUE = 48  # texts radar_texts holds waiting; the burst is several times that
BURST = 300
# Texts inside radar_texts at most while the classifier answers nothing: each instance's window of one-chunk-or-more
# texts, one more text per instance waiting for room in its window, and its queue.
HELD_AT_MOST = INSTANCES * (WINDOW + 1) + QUEUE
GATE = Gate("radar_classifier", queue=None)


def one_chunk_per_request(config) -> None:
    """The classifier takes one chunk per request and per execution, so that without the window the burst's
    chunks would pile up in its queue by the hundred."""
    config.max_batch_size = 1
    config.dynamic_batching.ClearField("preferred_batch_size")


def texts_window(config) -> None:
    tiny_queue(QUEUE, INSTANCES, max_batch=1, window=WINDOW)(config)  # a text per execution: fewer chunks than WINDOW
    config.parameters["max_batch"].string_value = "1"  # the classifier's rows per request, derived at build
    config.parameters["call_threads"].string_value = "64"  # so that the calls in flight are bounded by the window alone
    GATE.as_parameter("classifier")(config)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory, radar_artifacts):
    patches = {"radar_texts": texts_window, "radar_classifier": one_chunk_per_request}
    with own_server(tmp_path_factory.mktemp("window-bound"), patches, profile=SIM / "sim-h100.json", gates=[GATE]) as server:
        yield server


async def burst(url: str, texts: list[str], refused: list | None = None) -> list:
    """Each text's answer or refusal; `refused` gets each refusal as it comes."""
    endpoint = Endpoint(url, "grpc")
    client = endpoint.client(asyncio=True)

    async def one(text):
        try:
            return await client.infer("radar", endpoint.inputs(text_tensor(text), asyncio=True))
        except InferenceServerException as exc:
            if refused is not None:
                refused.append(exc)
            return exc

    try:
        return await asyncio.gather(*(one(text) for text in texts))
    finally:
        await client.close()


def test_the_window_bounds_a_classifier_without_a_queue_policy(simulated):
    gate = parse_config((simulated.options.repository / GATE.name / "config.pbtxt").read_text())
    assert not gate.dynamic_batching.HasField("default_queue_policy"), "the profile under test keeps the policy"
    texts = sample_texts(BURST // 5, 100, 800, seed=44)
    url = simulated.options.grpc_url
    alone = {text: RadarResult.from_response(asyncio.run(burst(url, [text]))[0]) for text in texts}  # nothing else in flight
    sent, refused, results = texts * 5, [], []
    with GATE.closed():
        firing = threading.Thread(target=lambda: results.extend(asyncio.run(burst(url, sent, refused))))
        firing.start()
        # At most HELD_AT_MOST texts get in while nothing is answered, so the rest is refused while the gate holds.
        assert wait_for(lambda: len(refused) >= BURST - HELD_AT_MOST, WAIT_S, every=0.05), f"{len(refused)} refused"
        assert wait_for(lambda: GATE.holds(simulated) > 0, WAIT_S, every=0.05), "no chunk reached the classifier"
        # Chunks only arrive while nothing is answered: what the classifier holds now is the most it held.
        at_the_classifier = GATE.holds(simulated)
    firing.join()
    answered = 0
    for text, result in zip(sent, results, strict=True):
        if isinstance(result, Exception):
            assert is_overload(result), result
            continue
        answered += 1
        got, expected = RadarResult.from_response(result), alone[text]
        assert got.chunk_spans == expected.chunk_spans
        np.testing.assert_allclose(got.chunk_scores, expected.chunk_scores, atol=1e-6, rtol=0)
    figures = {"burst": BURST, "answered": answered, "window": WINDOW, "instances": INSTANCES}
    save_result("window_bound", figures | {"held_by_the_classifier": at_the_classifier})
    assert at_the_classifier <= INSTANCES * WINDOW, at_the_classifier
