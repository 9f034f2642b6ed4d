"""Peak through the front door: KIT_DOOR_PEAK_REQUESTS requests (200 by default; issue 16's figure is 1,000)
to `POST /v1/radar` at once, through a door in front of the session's server. Every request gets exactly
one answer, and it is either a 200 equal to what Triton answers directly for that text (within
test_door_routes' tolerance) or a 429 with Retry-After: nothing else, nothing lost. Triton answered
no more requests than the door's 200s (the door coalesces concurrent texts into fewer, door.coalesce, and asks
none twice), and the door and Triton are ready afterwards."""

from __future__ import annotations

import asyncio
import resource
import time
from collections import Counter
from collections.abc import Callable

import aiohttp
import numpy as np
import pytest

from clients.door import radar_result
from clients.radar import RadarClient, RadarResult
from samples.texts import sample_texts
from tests.served.doors import call, running_door
from tests.served.pending import sampling_pending
from tests.served.reliability import save_result, scale

REQUESTS = int(scale("DOOR_PEAK_REQUESTS", 200))
TEXTS = sample_texts(50, 100, 800, seed=81)
OVERLOADED = "urn:triton-kit:problem:overloaded"


@pytest.fixture(scope="module")
def direct(server) -> list[RadarResult]:
    """What Triton answers for each text, one at a time over gRPC."""
    client = RadarClient(server.options.grpc_url)
    try:
        return [client.classify(text) for text in TEXTS]
    finally:
        client.close()


async def fire(url: str, count: int) -> list:
    """`count` POSTs at once, a connection each (no client-side limit): (status, body, Retry-After) per
    request, in order, or the exception that ended it."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as session:

        async def one(i: int):
            try:
                async with session.post(f"{url}/v1/radar", json={"text": TEXTS[i % len(TEXTS)]}) as response:
                    return response.status, await response.json(content_type=None), response.headers.get("Retry-After")
            except Exception as exc:  # judged by the test
                return exc

        return await asyncio.gather(*(one(i) for i in range(count)))


def assert_same(got: RadarResult, want: RadarResult) -> None:
    assert got.chunk_spans == want.chunk_spans
    np.testing.assert_allclose(got.chunk_scores, want.chunk_scores, atol=1e-5, rtol=0)
    assert got.score == pytest.approx(want.score, abs=1e-5)


def answered(grpc_client) -> int:
    """Requests `radar` has answered, by Triton's statistics."""
    return grpc_client.get_inference_statistics("radar").model_stats[0].inference_stats.success.count


def settled(read: Callable[[], int], expected: int, within_s: float = 5.0) -> int:
    """`read()` once it equals `expected`, else its value after `within_s`: Triton's statistics may trail
    its last answer a little."""
    deadline = time.monotonic() + within_s
    while (value := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return value


def test_a_peak_through_the_door_ends_in_right_answers_or_429s(server, grpc_client, direct, tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # a socket per request, here and in the door (inherited)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, REQUESTS + 256)), hard))
    with running_door(server.options.grpc_url, tmp_path / "door.log") as door:
        before = answered(grpc_client)
        with sampling_pending(server.options.metrics_url) as pending:
            start = time.perf_counter()
            outcomes = asyncio.run(fire(door.url, REQUESTS))
            seconds = time.perf_counter() - start
        counts, other = Counter(), []
        for i, outcome in enumerate(outcomes):
            status, body, retry_after = outcome if isinstance(outcome, tuple) else (None, outcome, None)
            if status == 200:
                assert_same(radar_result(body), direct[i % len(TEXTS)])
                counts["right"] += 1
            elif status == 429 and body["type"] == OVERLOADED and (retry_after or "").isdigit() and 1 <= int(retry_after) <= 30:
                counts["refused"] += 1
            else:
                other.append((i, status, body))
        assert not other, f"{len(other)} requests ended in neither a 200 nor a 429 with Retry-After, e.g. {other[0]!r}"
        right = counts["right"]
        assert right, f"nothing was answered: {dict(counts)}"
        requests = settled(lambda: answered(grpc_client) - before, right)
        assert 0 < requests <= right, f"Triton answered {requests} requests for the door's {right} 200s"
        ready = call(door, "GET", "/health/ready")
        assert ready.status == 200, ready.data
    assert server.is_ready()
    save_result(
        "peak_door",
        {
            "requests": REQUESTS,
            "seconds": round(seconds, 2),
            "held_by_server_at_once": pending.peak["radar_texts"],
            "triton_requests": requests,
            **counts,
        },
    )
