"""The door's coalescing of concurrent texts (door.coalesce) and the texts model's side of it (kit.adapters.grouped_calls):
the policy and the bookkeeping, with a sender the test holds; tests/served/test_door_coalesce.py sends to Triton."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from door.coalesce import Coalescer, split
from door.flow import Flow
from door.problems import Problem
from kit.adapters.grouped_calls import Carried


class Sender:
    """Answers each request of n texts as the entry does (SCORE [n], CHUNKS [n], a chunk row per byte of a text),
    once the test releases it; records every request's texts."""

    def __init__(self, bad: bytes = b"", refuse: Problem | None = None):
        self.requests: list[list[bytes]] = []
        self.release = asyncio.Event()
        self.bad, self.refuse = bad, refuse

    async def __call__(self, texts, request_ids, seconds):
        self.requests.append(list(texts))
        await self.release.wait()
        if self.refuse is not None:
            raise self.refuse
        if self.bad in texts and self.bad:
            raise Problem(422, "invalid-input", "TEXT 1 is not valid UTF-8")
        chunks = [len(text) for text in texts]
        return {
            "SCORE": np.array([len(text) / 10 for text in texts], np.float32),
            "CHUNKS": np.array(chunks, np.int32),
            "CHUNK_SPANS": np.array([[i, i + 1] for n in chunks for i in range(n)], np.int32).reshape(-1, 2),
        }


async def turns(count=5):
    """Let the loop run what is ready: the pump (after the turn that queued a text), then the send it starts."""
    for _ in range(count):
        await asyncio.sleep(0)


def coalescer(sender, in_flight=1, max_texts=8, max_bytes=1 << 20, max_waiting=64) -> tuple[Coalescer, Flow]:
    flow = Flow()
    return Coalescer("radar", sender, flow, in_flight, max_texts, max_bytes, max_waiting), flow


def test_texts_that_wait_for_a_request_in_flight_go_together_in_the_next():
    async def run():
        sender = Sender()
        texts, flow = coalescer(sender, in_flight=1)
        first = asyncio.create_task(texts.infer([b"a"], "r1", 10))
        await turns()
        assert sender.requests == [[b"a"]], "alone at a light load: nothing waits"
        rest = [asyncio.create_task(texts.infer([text], f"r{i}", 10)) for i, text in enumerate([b"bb", b"ccc", b"d"])]
        await turns()
        assert len(sender.requests) == 1 and flow.in_flight == 4, "the others wait while one request is out"
        sender.release.set()
        answers = [(await task)[0] for task in (first, *rest)]
        assert sender.requests == [[b"a"], [b"bb", b"ccc", b"d"]]
        assert [float(a["SCORE"][0]) for a in answers] == pytest.approx([0.1, 0.2, 0.3, 0.1])
        assert [len(a["CHUNK_SPANS"]) for a in answers] == [1, 2, 3, 1]
        assert flow.in_flight == 0 and len(flow.answers) == 4

    asyncio.run(run())


def test_the_texts_of_one_call_go_in_one_request_within_its_caps():
    async def run():
        sender = Sender()
        sender.release.set()
        texts, _ = coalescer(sender, in_flight=4, max_texts=3, max_bytes=5)
        answers = await texts.infer([b"aa", b"bb", b"c", b"dddddd", b"e"], "r", 10)
        assert sender.requests == [[b"aa", b"bb", b"c"], [b"dddddd"], [b"e"]], "3 texts, 5 bytes, a longer text alone"
        assert [len(a["CHUNK_SPANS"]) for a in answers] == [2, 2, 1, 6, 1]

    asyncio.run(run())


def test_a_bad_text_in_a_coalesced_request_fails_alone():
    async def run():
        sender = Sender(bad=b"\xff")
        sender.release.set()
        texts, flow = coalescer(sender)
        calls = [texts.infer([text], "r", 10) for text in (b"good", b"\xff", b"fine")]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        assert sender.requests[0] == [b"good", b"\xff", b"fine"], "first together"
        assert sorted(sender.requests[1:]) == [[b"fine"], [b"good"], [b"\xff"]], "then each alone"
        assert isinstance(outcomes[1], Problem) and outcomes[1].status == 422
        assert float(outcomes[0][0]["SCORE"][0]) == pytest.approx(0.4) and float(outcomes[2][0]["SCORE"][0]) == pytest.approx(0.4)
        assert flow.in_flight == 0 and len(flow.answers) == 3, "a bad text is an answer of the model's"

    asyncio.run(run())


def test_a_refused_request_refuses_each_of_its_texts_and_counts_none_as_answered():
    async def run():
        sender = Sender(refuse=Problem(429, "overloaded", "radar: maximum queue size"))
        sender.release.set()
        texts, flow = coalescer(sender)
        outcomes = await asyncio.gather(*(texts.infer([b"t"], "r", 10) for _ in range(3)), return_exceptions=True)
        assert [outcome.status for outcome in outcomes] == [429, 429, 429]
        assert flow.in_flight == 0 and not flow.answers

    asyncio.run(run())


def test_a_text_past_its_deadline_fails_alone_and_one_whose_caller_left_is_never_sent():
    async def run():
        sender = Sender()
        texts, flow = coalescer(sender, in_flight=1)
        held = asyncio.create_task(texts.infer([b"a"], "r", 10))
        await asyncio.sleep(0.01)
        late = asyncio.create_task(texts.infer([b"late"], "r", 0.05))
        gone = asyncio.create_task(texts.infer([b"gone"], "r", 10))
        kept = asyncio.create_task(texts.infer([b"kept"], "r", 10))
        await asyncio.sleep(0.01)
        gone.cancel()
        with pytest.raises(Problem) as timed_out:
            await late
        assert timed_out.value.status == 504
        sender.release.set()
        await held
        assert float((await kept)[0]["SCORE"][0]) == pytest.approx(0.4)
        assert sender.requests == [[b"a"], [b"kept"]], "neither the late text nor the one whose caller left was sent"
        assert flow.in_flight == 0

    asyncio.run(run())


def test_a_requests_outputs_split_into_each_texts_own_shape():
    outputs = {
        "SCORES": np.arange(6, dtype=np.float32),  # 2 texts x 3 labels, one after another
        "CHUNK_SCORES": np.arange(9, dtype=np.float32).reshape(3, 3),
        "CHUNK_SPANS": np.array([[0, 5], [0, 3], [3, 6]], np.int32),
        "TOKENS": np.array([4, 9], np.int32),
        "CHUNKS": np.array([1, 2], np.int32),
    }
    first, second = split(outputs, 2)
    assert first["SCORES"].tolist() == [0, 1, 2] and second["SCORES"].tolist() == [3, 4, 5]
    assert first["CHUNK_SCORES"].shape == (1, 3) and second["CHUNK_SPANS"].tolist() == [[0, 3], [3, 6]]
    assert first["TOKENS"].tolist() == [4] and second["CHUNKS"].tolist() == [2]


def test_an_image_classifiers_outputs_split_into_a_row_per_image():
    first, second, third = split({"SCORES": np.arange(6, dtype=np.float32).reshape(3, 2)}, 3)  # no CHUNKS: a row each
    assert [part["SCORES"].tolist() for part in (first, second, third)] == [[0, 1], [2, 3], [4, 5]]


def test_a_request_of_several_items_is_answered_once_all_of_them_are():
    carried = Carried(kept=[0, 2], counts=[1, 3])  # request 1 failed its check; 0 carries one item, 2 three
    assert [carried.request(item) for item in range(4)] == [0, 2, 2, 2]
    assert carried.add(2, "c") is None and carried.add(0, "a") == ["a"]
    assert carried.add(3, "d") is None and carried.add(1, "b") == ["b", "c", "d"]


def test_texts_beyond_the_waiting_bound_are_refused_at_once_and_the_bound_frees_as_texts_leave():
    async def run():
        sender = Sender()
        texts, flow = coalescer(sender, in_flight=1, max_waiting=2)
        held = asyncio.create_task(texts.infer([b"a"], "r", 10))
        await turns()
        waiting = [asyncio.create_task(texts.infer([text], "r", 10)) for text in (b"b", b"c")]
        await turns()
        with pytest.raises(Problem) as refused:
            await texts.infer([b"d"], "r", 10)
        assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "1"
        assert flow.in_flight == 3, "a refused text is not counted in flight"
        waiting[0].cancel()
        await turns()
        late = asyncio.create_task(texts.infer([b"e"], "r", 10))  # the cancelled text's place
        await turns()
        sender.release.set()
        await held
        assert [(await task)[0]["CHUNKS"].tolist() for task in (waiting[1], late)] == [[1], [1]]
        assert sender.requests == [[b"a"], [b"c", b"e"]] and texts.queued == 0

    asyncio.run(run())
