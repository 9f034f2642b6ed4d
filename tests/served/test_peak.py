"""Peak: at least 1,000 requests in flight at once, over each protocol, on a server of its own whose classifier is
reached through a gate (tests.served.gate). While the gate holds the classifier busy nothing RADAR is asked is
answered, so every text of the burst waits in the server at once, in `radar_texts`' own queue, by construction and
not by racing the server; then the gate opens and every request ends in a right answer or a clear overload refusal,
no connection fails, and the server is ready afterwards. `make peak` raises the count (KIT_PEAK_REQUESTS) past
radar's queue bound of 2,048 texts, and the surplus is refused while the gate holds.

A workload is a model, its inputs for request i, a check of the response and its share of the
requests: adding a model to the mix is one more line in `workloads`. The mix is RADAR texts with
one OCR image in every OCR_EVERY requests (an image costs ~100x a text's CPU here, so an even mix
would turn the peak test into a minutes-long OCR benchmark); the images do not go through the gate, and are answered
while the texts wait. The texts are long, 10-20 chunks each, as a real burst's work would be."""

from __future__ import annotations

import asyncio
import resource
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import pytest
import tritonclient.http.aio as httpaio

from clients.ocr import OcrClient
from clients.radar import RadarResult, text_tensor
from clients.triton import Endpoint
from kit.control.configs import parse_config
from samples.images import document
from samples.texts import sample_texts
from tests.served.gate import Gate, pending
from tests.served.reliability import RADAR_MODELS, is_overload, own_server, save_result, scale, wait_for
from tests.served.test_ocr import OCR_MODELS

REQUESTS = int(scale("PEAK_REQUESTS", 1000))
OCR_EVERY = 40


@dataclass
class Workload:
    model: str
    inputs: Callable[[int], dict[str, np.ndarray]]
    check: Callable[[int, object], None]  # raises AssertionError on a wrong answer
    weight: int = 1  # requests of this workload in each cycle of the mix


def radar_workload(reference) -> Workload:
    texts = sample_texts(100, 3000, 6000, seed=43)
    score = lru_cache(maxsize=None)(reference)

    def check(i, response):
        text, result = texts[i % len(texts)], RadarResult.from_response(response)
        assert result.chunk_spans[-1][1] == len(text)
        expected = [score(text[s:e]) for s, e in result.chunk_spans]
        np.testing.assert_allclose(result.chunk_scores, expected, atol=1e-4, rtol=0)

    return Workload("radar", lambda i: text_tensor(texts[i % len(texts)]), check)


def ocr_workload(grpc_url: str) -> Workload:
    """Small generated pages; the right answer is what the server reads with nothing else in flight
    (tests/served/test_ocr.py holds that equal to RapidOCR's)."""
    images = [document(seed, width=480, lines=3).data for seed in (21, 22, 23)]
    client = OcrClient(grpc_url)
    try:
        expected = [[line.text for line in client.read(data)] for data in images]
    finally:
        client.close()
    assert all(expected), "the reference pages should each have text"

    def check(i, response):
        texts = [t.decode("utf-8") for t in response.as_numpy("TEXTS").reshape(-1)]
        assert texts == expected[i % len(images)]

    return Workload("ocr", lambda i: {"IMAGE": np.array([images[i % len(images)]], dtype=np.object_)}, check)


GATE = Gate("radar_classifier", queue=None)  # the classifier's own policy: what holds the texts is radar_texts'


@pytest.fixture(scope="module")
def gated(tmp_path_factory, radar_artifacts):
    patches = {"radar_texts": GATE.as_parameter("classifier")}
    with own_server(tmp_path_factory.mktemp("peak"), patches, models=(*RADAR_MODELS, *OCR_MODELS), gates=[GATE]) as server:
        yield server


@pytest.fixture
def workloads(reference, gated) -> list[Workload]:
    ocr = ocr_workload(gated.options.grpc_url)
    return [replace(radar_workload(reference), weight=OCR_EVERY - 1), ocr]


def workload_for(i: int, workloads: list[Workload]) -> Workload:
    cycle = [w for w in workloads for _ in range(w.weight)]
    return cycle[i % len(cycle)]


async def fire(endpoint: Endpoint, workloads: list[Workload], count: int) -> list:
    """`count` requests, cycling through the workloads, all sent at once (no client-side limit)."""
    if endpoint.protocol == "grpc":
        client = endpoint.client(asyncio=True)  # one HTTP/2 connection carries every request
    else:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # HTTP/1.1: a socket per request in flight
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 256)), hard))
        client = httpaio.InferenceServerClient(endpoint.url, conn_limit=count)

    async def one(i):
        workload = workload_for(i, workloads)
        try:
            return i, workload, await client.infer(workload.model, endpoint.inputs(workload.inputs(i), asyncio=True))
        except Exception as exc:  # judged by the test
            return i, workload, exc

    try:
        return await asyncio.gather(*(one(i) for i in range(count)))
    finally:
        await client.close()


def test_peak_of_concurrent_requests_ends_in_right_answers_or_clear_refusals(gated, protocol, workloads):
    texts = sum(workload_for(i, workloads).model == "radar" for i in range(REQUESTS))
    config = parse_config((gated.options.repository / "radar_texts" / "config.pbtxt").read_text())
    queue = config.dynamic_batching.default_queue_policy.max_queue_size
    # Texts not in the queue while the classifier answers nothing: per instance, an execution's in its window of
    # chunks (a window always admits one) and the next execution's, waiting for room, at most max_batch_size each.
    outside = sum(group.count for group in config.instance_group) * 2 * config.max_batch_size
    url = gated.options.grpc_url if protocol == "grpc" else gated.options.http_url
    results: list = []
    with GATE.closed():
        start = time.perf_counter()
        firing = threading.Thread(target=lambda: results.extend(asyncio.run(fire(Endpoint(url, protocol), workloads, REQUESTS))))
        firing.start()
        held = lambda: pending(gated, "radar_texts")  # noqa: E731
        assert wait_for(lambda: held() >= min(texts, queue) - outside, 300, every=0.1), f"{held()} texts held at once"
        held_at_once = held()
    firing.join()
    seconds = time.perf_counter() - start
    counts, other = Counter(), []
    for i, workload, outcome in results:
        if is_overload(outcome):
            counts[f"{workload.model} refused"] += 1
        elif isinstance(outcome, Exception):
            other.append(outcome)
        else:
            workload.check(i, outcome)
            counts[f"{workload.model} right"] += 1
    save_result(
        f"peak_{protocol}",
        {"requests": REQUESTS, "seconds": round(seconds, 2), "radar texts held at once": held_at_once, **counts},
    )
    assert not other, f"{len(other)} requests failed without a clear overload error, e.g. {other[0]!r}"
    assert all(counts[f"{w.model} right"] for w in workloads), f"every model of the mix answers: {dict(counts)}"
    assert counts["radar refused"] >= texts - queue - outside, "past the queue's bound the texts are refused"
    assert gated.is_ready()
