"""Concurrent texts bound for one text entry, sent to Triton as one request (the entry's TEXT [n]); likewise encoded
images bound for an image classifier's entry (IMAGE [n, 1], a row each), whose answers are a row each.

What the door and the entry's texts model spend per request (a gRPC call, a Triton request through the ensemble, a
hand-off and an answer) they spend once for all the texts of a coalesced one. A Coalescer sends what is waiting as
soon as fewer than `in_flight` of its requests are out, so at a light load a text goes at once, alone; beyond that
the texts wait, and the next request carries all that waited (at most `max_texts`, and `max_bytes` of text unless a
text is larger alone): a request grows with the load, as a batcher's batches do, without a timer. The texts of one
call (a route's `texts`, OpenAI's `input` list) are queued together, so that they go in one request where they fit.
The texts waiting are bounded (`max_waiting`): beyond, a call is refused at once with 429 and Retry-After, as Triton's
bounded queue refuses a request, so that an overload is refused promptly rather than held.

Each text keeps what is its own: its deadline (past it, the text fails alone with 504 and its request goes on), its
place in the model's Flow (door.flow counts texts, so Retry-After and the in-flight gauge do), its answer (cut from
the request's: `CHUNKS` says how many rows of each CHUNK_ output are each text's, and every other output holds one
equal part per text), and its errors: a request refused as bad input (a text the door passed but the model does not
take) is sent again text by text, so that the bad one fails alone; a refusal of the request itself (overload, Triton
unreachable) is every text's. A text whose caller went away before it was sent is dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from door.flow import Flow
from door.problems import Problem

CHUNK_PREFIX = "CHUNK_"  # the outputs with a row per chunk, split by CHUNKS
REFUSED = (429, 503)  # not an answer of the model's (door.flow: overload and unavailability are not its pace)
MIN_CALL_S = 0.001  # a request's time left, however little: its texts' own deadlines answer them

# Sends texts as one request: (texts, request ids, seconds it may take) -> the request's outputs, or a Problem.
Send = Callable[[list[bytes], list[str], float], Awaitable[dict[str, np.ndarray]]]


@dataclass(eq=False)
class Text:
    data: bytes
    request_id: str
    deadline: float
    answer: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    sent: bool = False

    def settle(self, outputs: dict | None = None, problem: Problem | None = None) -> None:
        if not self.answer.done():
            if problem is None:
                self.answer.set_result(outputs)
            else:
                self.answer.set_exception(problem)


def split(outputs: dict[str, np.ndarray], count: int) -> list[dict[str, np.ndarray]]:
    """A request's outputs as its `count` texts' (or images') own: each one's rows of the CHUNK_ outputs (by CHUNKS),
    and an equal part of every other output, flat."""
    if count == 1:
        return [outputs]
    ends = np.cumsum(outputs["CHUNKS"].reshape(-1))[:-1] if "CHUNKS" in outputs else None  # an image's answer has none
    parts = [{} for _ in range(count)]
    for name, array in outputs.items():
        pieces = np.split(array, ends) if name.startswith(CHUNK_PREFIX) else np.split(array.reshape(-1), count)
        for part, piece in zip(parts, pieces):
            part[name] = piece
    return parts


class Coalescer:
    """One text entry's texts on their way to Triton. Used from the event loop only, so it needs no lock."""

    def __init__(self, model: str, send: Send, flow: Flow, in_flight: int, max_texts: int, max_bytes: int, max_waiting: int):
        self.model, self.send, self.flow = model, send, flow
        self.in_flight, self.max_texts, self.max_bytes, self.max_waiting = in_flight, max_texts, max_bytes, max_waiting
        self.waiting: deque[Text] = deque()  # and texts whose caller went away, until the next take() passes them
        self.queued = 0  # the texts waiting whose callers still wait
        self.out = 0  # requests sent and not answered
        self.pumping = False
        self.tasks: set[asyncio.Task] = set()

    async def infer(self, texts: list[bytes], request_id: str, timeout: float) -> list[dict[str, np.ndarray]]:
        """Each text's outputs; the first text's problem where any has one (the others still run their course)."""
        if self.queued + len(texts) > self.max_waiting:
            detail = f"{self.model}: {self.queued} texts or images wait at the door, which holds at most {self.max_waiting}"
            raise Problem(429, "overloaded", detail, {"Retry-After": str(self.flow.retry_after())})
        loop = asyncio.get_running_loop()
        items = [Text(data, request_id, loop.time() + timeout) for data in texts]
        for _ in items:
            self.flow.start()
        self.waiting.extend(items)
        self.queued += len(items)
        if not self.pumping:  # after this turn of the loop: the texts of other calls made in it go along
            self.pumping = True
            loop.call_soon(self.pump)
        outcomes = await asyncio.gather(*(self.wait(item, timeout) for item in items), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return outcomes

    async def wait(self, item: Text, timeout: float) -> dict[str, np.ndarray]:
        """The text's answer. Past its deadline, or when its caller goes away, its future is cancelled (by wait_for):
        a text not yet sent is then dropped, and a sent one's answer is let go."""
        answered = True
        try:
            return await asyncio.wait_for(item.answer, timeout)
        except TimeoutError:
            raise Problem(504, "upstream-timeout", f"{self.model}: no answer within {timeout:g} s") from None
        except Problem as problem:
            answered = problem.status not in REFUSED
            raise
        except asyncio.CancelledError:
            answered = False
            raise
        finally:
            self.flow.finish(answered=answered)
            if not item.sent:  # it leaves the queue unsent; take() will pass it
                self.queued -= 1

    def pump(self) -> None:
        self.pumping = False
        while self.waiting and self.out < self.in_flight:
            batch = self.take()
            if not batch:
                return
            self.out += 1
            task = asyncio.create_task(self.send_batch(batch))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def take(self) -> list[Text]:
        """The next request's texts, in order of arrival, skipping those whose caller went away."""
        batch: list[Text] = []
        size = 0
        while self.waiting and len(batch) < self.max_texts:
            item = self.waiting[0]
            if item.answer.done():
                self.waiting.popleft()
                continue
            if batch and size + len(item.data) > self.max_bytes:
                break
            batch.append(self.waiting.popleft())
            item.sent = True
            self.queued -= 1
            size += len(item.data)
        return batch

    async def send_batch(self, batch: list[Text]) -> None:
        try:
            await self.answer(batch)
        finally:
            self.out -= 1
            self.pump()

    async def answer(self, batch: list[Text]) -> None:
        loop = asyncio.get_running_loop()
        seconds = max(max(item.deadline for item in batch) - loop.time(), MIN_CALL_S)
        try:
            outputs = await self.send([item.data for item in batch], [item.request_id for item in batch], seconds)
        except Problem as problem:
            if problem.status == 422 and len(batch) > 1:  # one text is bad: each is asked alone
                await asyncio.gather(*(self.answer([item]) for item in batch))
                return
            for item in batch:
                item.settle(problem=problem)
            return
        except Exception as exc:  # a bug fails this request's texts, not the coalescer
            for item in batch:
                item.settle(problem=Problem(502, "upstream-error", f"{self.model}: {type(exc).__name__}: {exc}"))
            return
        for item, part in zip(batch, split(outputs, len(batch))):
            item.settle(part)
