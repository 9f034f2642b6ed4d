"""The front door under overload and attack, on a server of its own whose `radar` reaches its texts model through a
gate with a tiny queue (tests.served.gate, as tests/served/test_overload.py builds it): a full queue, full by
construction while the gate holds, becomes 429 with a measured Retry-After, the door's client rides it out with every
answer right, the chunked body that crashes Triton 2.51's HTTP front end never reaches Triton through the door, and
a dead Triton is 503 with Retry-After."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor

import pytest
import urllib3

from clients.door import DoorClient, radar_result
from clients.triton import RetryPolicy
from samples.texts import sample_texts
from tests.served.doors import assert_problem, call, running_door
from tests.served.gate import WAIT_S, Gate
from tests.served.reliability import own_server, save_result, wait_for
from tests.served.test_door_routes import chunked_until_refused, handled
from tests.served.test_radar import assert_matches_reference

EXTRA = 8  # requests sent once the queue is full: each must be refused
GATE = Gate("radar_texts", queue=4)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, radar_artifacts):
    root = tmp_path_factory.mktemp("door-gated")
    with (
        own_server(root, {"radar": GATE.as_step}, gates=[GATE]) as server,
        running_door(server.options.grpc_url, root / "door.log") as door,
    ):
        yield server, door


def test_a_full_queue_is_429_with_retry_after_and_every_answer_is_right(tiny, reference):
    server, door = tiny
    text = sample_texts(1, 250, 290, seed=71)[0]
    pool = urllib3.PoolManager(maxsize=GATE.queue + 1 + EXTRA)

    def post():
        return pool.request("POST", f"{door.url}/v1/radar", json={"text": text}, timeout=120, retries=False)

    with ThreadPoolExecutor(GATE.queue + 1 + EXTRA) as threads:
        with GATE.closed():
            held = GATE.fill(server, threads, post)
            refused = list(threads.map(lambda _: post(), range(EXTRA)))
            assert not any(future.done() for future in held), "a held request ended while the gate was closed"
        answered = [future.result() for future in held]
    pool.clear()
    for response in refused:
        assert_problem(response, 429, "overloaded")
        assert 1 <= int(response.headers["Retry-After"]) <= 30
    for response in answered:
        assert response.status == 200, response.data[:300]
        assert_matches_reference(text, radar_result(response.json()), reference)
    save_result(
        "door_overload_radar",
        {
            "held": len(answered),
            "refused": len(refused),
            "retry_after_s": sorted({int(r.headers["Retry-After"]) for r in refused}),
        },
    )


def test_the_door_client_honours_retry_after_and_gets_every_answer_right(tiny, reference):
    """The queue is full while the client starts, so its first tries are refused; the gate opens once it has retried."""
    server, door = tiny
    texts = sample_texts(16, 300, 900, seed=72)
    plain = DoorClient(door.url, retry=RetryPolicy(attempts=1))
    client = DoorClient(door.url, retry=RetryPolicy(attempts=30, cap=1.0))
    with ThreadPoolExecutor(GATE.queue + 1 + len(texts)) as threads:
        with GATE.closed():
            held = GATE.fill(server, threads, lambda: plain.classify(texts[0]))
            results = [threads.submit(client.classify, text) for text in texts]
            assert wait_for(lambda: client.retries.count > 0, WAIT_S), "the full queue refused nothing"
        for future in held:
            assert_matches_reference(texts[0], future.result(), reference)
        for text, future in zip(texts, results):
            assert_matches_reference(text, future.result(), reference)


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
