"""The front door under overload and attack, on a server of its own with tiny RADAR queues (built as
tests/served/test_overload.py builds them) and a door that holds at most 4 texts waiting to be coalesced
(door.coalesce): a full queue, Triton's or the door's, becomes 429 with a measured Retry-After, the
door's client rides it out with every answer right, the chunked body that crashes Triton 2.51's HTTP
front end never reaches Triton through the door, and a dead Triton is 503 with Retry-After."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import urllib3

from clients.door import DoorClient
from clients.radar import RadarResult
from clients.triton import RetryPolicy
from samples.texts import sample_texts
from tests.served.doors import assert_problem, call, running_door
from tests.served.reliability import own_server, save_result, scale, tiny_queue
from tests.served.test_door_routes import chunked_until_refused, handled
from tests.served.test_radar import assert_matches_reference

FLOOD = int(scale("DOOR_FLOOD", 40))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, radar_artifacts):
    root = tmp_path_factory.mktemp("door-tiny-queue")
    patches = {"radar_texts": tiny_queue(4, 2, max_batch=1, window=4), "radar_classifier": tiny_queue(8, 1)}
    log, env = root / "door.log", {"DOOR_COALESCE_WAITING": "4"}
    with own_server(root, patches) as server, running_door(server.options.grpc_url, log, env=env) as door:
        yield server, door


def test_a_full_queue_is_429_with_retry_after_and_every_answer_is_right(tiny, reference):
    _, door = tiny
    text = sample_texts(1, 250, 290, seed=71)[0]  # one chunk: radar_texts' queue refuses, not the classifier's
    pool = urllib3.PoolManager(maxsize=FLOOD)

    def one(_):
        start = time.perf_counter()
        response = pool.request("POST", f"{door.url}/v1/radar", json={"text": text}, timeout=60, retries=False)
        return time.perf_counter() - start, response

    with ThreadPoolExecutor(FLOOD) as threads:
        results = list(threads.map(one, range(FLOOD)))
    pool.clear()
    refused = [(s, r) for s, r in results if r.status == 429]
    answered = [r for _, r in results if r.status == 200]
    assert refused and answered and len(refused) + len(answered) == FLOOD, sorted({r.status for _, r in results})
    for seconds, response in refused:
        assert_problem(response, 429, "overloaded")
        assert 1 <= int(response.headers["Retry-After"]) <= 30
        assert seconds < 2.0
    for response in answered:
        chunks = response.json()["chunks"]
        result = RadarResult(response.json()["score"], [c["score"] for c in chunks], [(c["start"], c["end"]) for c in chunks])
        assert_matches_reference(text, result, reference)
    save_result(
        "door_overload_radar",
        {
            "requests": FLOOD,
            "refused": len(refused),
            "retry_after_s": sorted({int(r.headers["Retry-After"]) for _, r in refused}),
        },
    )


def test_the_door_client_honours_retry_after_and_gets_every_answer_right(tiny, reference):
    _, door = tiny
    texts = sample_texts(16, 300, 900, seed=72)
    client = DoorClient(door.url, retry=RetryPolicy(attempts=30, cap=1.0))
    with ThreadPoolExecutor(len(texts)) as threads:
        results = list(threads.map(client.classify, texts))
    for text, result in zip(texts, results):
        assert_matches_reference(text, result, reference)
    assert client.retries.count > 0, "nothing was refused, so nothing was retried: the test did not overload"


def test_the_chunked_body_that_crashes_triton_never_reaches_it_through_the_door(tiny):
    server, door = tiny
    pid, before = server.process.pid, handled_on(server, "radar")
    status, problem = chunked_until_refused(door, b" ", 1_000_000)
    assert (status, problem["type"]) == (400, "urn:triton-kit:problem:malformed-body"), problem
    assert server.process.pid == pid and server.process.poll() is None and server.is_ready()
    assert handled_on(server, "radar") == before
    assert DoorClient(door.url).classify("Still answering after the attack.").chunk_spans == [(0, 33)]


def handled_on(server, model: str) -> int:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.options.grpc_url)
    try:
        return handled(client, model)
    finally:
        client.close()


def test_zz_a_dead_triton_is_503_with_retry_after_and_not_ready(tiny):
    """Runs last in this module: it kills the module's server."""
    server, door = tiny
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    response = call(door, "POST", "/v1/radar", json={"text": "Anyone there?"})
    assert_problem(response, 503, "unavailable")
    assert int(response.headers["Retry-After"]) >= 1
    ready = call(door, "GET", "/health/ready")
    assert ready.status == 503 and ready.json()["triton"] is False and ready.json()["ready"] is False
