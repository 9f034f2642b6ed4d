"""A chaos run's clients: closed-loop threads, each sending its model's next input as soon as its last request ended,
over Triton's gRPC or through the door, with the kit's own clients and their retry policy; and the tally of how every
request ended: right, wrong, refused (a clear, retryable refusal that outlasted the retry policy, by status), failed
(any other error, by message) or lost (no answer: still in flight when the run ended, or timed out waiting).

perf.engine.load's loop is asyncio over one shared client without retries, for throughput; here each client is the
kit's own, retrying as a user's would, and what matters is how each request ends, so the clients are threads."""

from __future__ import annotations

import threading
import time
import urllib.error
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from tritonclient.utils import InferenceServerException

from clients import door as door_client
from clients import triton
from clients.base import ModelClient
from clients.door import DoorClient, DoorError
from clients.radar import RadarClient
from clients.triton import RetryPolicy
from perf.chaos.answers import Cases

# Enough retries to ride out a restart of the server under load (test_faults' policy): about 35 s of retrying.
PATIENT = RetryPolicy(attempts=40, base=0.05, cap=2.0)
DOOR_TIMEOUT_S = 120.0  # one try through the door; a request that waits longer for its answer is lost
MESSAGES = 20  # distinct messages counted per outcome and kind

Ask = Callable[[object], object]
Connect = Callable[[str, str, RetryPolicy], tuple[Ask, Callable[[], None]]]


def radar(grpc_url: str, door_url: str, transport: str, retry: RetryPolicy) -> tuple[Ask, Callable[[], None]]:
    if transport == "door":
        return DoorClient(door_url, retry=retry, timeout=DOOR_TIMEOUT_S).classify, lambda: None
    client = RadarClient(grpc_url, "grpc", retry=retry)
    return client.classify, client.close


def resnet50(grpc_url: str, door_url: str, transport: str, retry: RetryPolicy) -> tuple[Ask, Callable[[], None]]:
    if transport == "door":
        door = DoorClient(door_url, retry=retry, timeout=DOOR_TIMEOUT_S)
        return lambda image: door.resnet50(image[0]), lambda: None
    client = ModelClient("resnet50", ["PROBS"], grpc_url, retry=retry)
    return lambda image: client.infer({"INPUT": image})["PROBS"][0], client.close


def tensors(model: str, outputs: list[str], route: str) -> Connect:
    """A user spec's model: its tensors by name, on Triton's gRPC or the door's tensor route."""

    def connect(grpc_url: str, door_url: str, transport: str, retry: RetryPolicy) -> tuple[Ask, Callable[[], None]]:
        if transport == "door":
            door = DoorClient(door_url, retry=retry, timeout=DOOR_TIMEOUT_S)
            return lambda arrays: door.infer(route, arrays), lambda: None
        client = ModelClient(model, outputs, grpc_url, retry=retry)
        return client.infer, client.close

    return connect


@dataclass(frozen=True)
class Kind:
    """`clients` closed-loop clients of one model through one transport."""

    cases: Cases
    transport: str  # "grpc" or "door"
    clients: int
    connect: Connect

    @property
    def name(self) -> str:
        return f"{self.cases.model} {self.transport}"


def status(exc: BaseException) -> str:
    if isinstance(exc, InferenceServerException):
        return str(exc.status())
    if isinstance(exc, DoorError):
        return str(exc.status)
    return type(exc).__name__


def timed_out(exc: BaseException) -> bool:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    return isinstance(reason, TimeoutError) or "DEADLINE_EXCEEDED" in status(exc)


def ending(exc: BaseException) -> tuple[str, str]:
    """How a request that raised ended: lost (it timed out waiting), refused (retryable, by status) or failed."""
    if timed_out(exc):
        return "lost", f"timed out: {exc}"[:300]
    if triton.is_retryable(exc) or door_client.retryable(exc):
        return "refused", status(exc)
    message = exc.message() if isinstance(exc, InferenceServerException) else str(exc)
    return "failed", f"{type(exc).__name__} [{status(exc)}]: {message}"[:300]


class Tally:
    """How each request of each kind ended, thread-safe: counts, refusals by status, and the messages of the failures,
    wrong answers and losses, counted (the first MESSAGES distinct ones)."""

    OUTCOMES = ("right", "wrong", "refused", "failed", "lost")

    def __init__(self):
        self.start = time.monotonic()
        self.lock = threading.Lock()
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.refused: dict[str, Counter] = defaultdict(Counter)
        self.messages: dict[str, dict[str, dict]] = defaultdict(lambda: defaultdict(dict))  # detail -> count, first, last
        self.slowest: dict[str, float] = defaultdict(float)

    def add(self, kind: str, outcome: str, detail: str = "", seconds: float = 0.0) -> None:
        with self.lock:
            self.counts[kind][outcome] += 1
            self.counts[kind]["sent"] += 1
            self.slowest[kind] = max(self.slowest[kind], seconds)
            if outcome == "refused":
                self.refused[kind][detail] += 1
            elif outcome != "right":
                seen, at = self.messages[kind][outcome], round(time.monotonic() - self.start, 1)
                if detail in seen:
                    seen[detail].update(count=seen[detail]["count"] + 1, last_s=at)
                elif len(seen) < MESSAGES:
                    seen[detail] = {"count": 1, "first_s": at, "last_s": at}

    def ended(self, kind: str, call: Callable[[], object], check: Callable[[object], bool], explain=None) -> None:
        """Send one request by `call()` and file how it ended; `explain(answer)` says what a wrong answer is."""
        start = time.monotonic()
        try:
            answer = call()
        except Exception as exc:  # every way a request can end is filed, and judged by the run's verdict
            outcome, detail = ending(exc)
        else:
            right = check(answer)
            outcome = "right" if right else "wrong"
            detail = "" if right else (explain(answer) if explain else str(answer)[:200])
        self.add(kind, outcome, detail, time.monotonic() - start)

    def totals(self) -> Counter:
        with self.lock:
            return sum(self.counts.values(), Counter())

    def figures(self) -> dict:
        with self.lock:
            return {
                kind: {
                    **{outcome: counts[outcome] for outcome in ("sent", *self.OUTCOMES)},
                    "refused_by_status": dict(self.refused[kind]),
                    "slowest_s": round(self.slowest[kind], 2),
                    **({"messages": {o: dict(m) for o, m in self.messages[kind].items()}} if self.messages[kind] else {}),
                }
                for kind, counts in sorted(self.counts.items())
            }


class ClosedLoop:
    """The run's clients: for each kind, `clients` threads; `stop(grace)` lets the requests in flight end and files
    those that have not within `grace` seconds as lost."""

    def __init__(self, kinds: list[Kind], grpc_url: str, door_url: str, tally: Tally, retry: RetryPolicy = PATIENT):
        self.kinds, self.grpc_url, self.door_url, self.tally, self.retry = kinds, grpc_url, door_url, tally, retry
        self.stopping = threading.Event()
        self.in_flight: dict[int, tuple[str, float]] = {}
        self.threads = [
            threading.Thread(target=self.client, args=(kind, k), name=f"{kind.name} {k}", daemon=True)
            for kind in kinds
            for k in range(kind.clients)
        ]

    @property
    def size(self) -> int:
        return len(self.threads)

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def client(self, kind: Kind, k: int) -> None:
        ask, close = kind.connect(self.grpc_url, self.door_url, kind.transport, self.retry)
        me = threading.get_ident()
        try:
            index = k
            while not self.stopping.is_set():
                self.in_flight[me] = (kind.name, time.monotonic())
                check, explain = partial(kind.cases.check, index), partial(kind.cases.explain, index)
                self.tally.ended(kind.name, partial(ask, kind.cases.input(index)), check, explain)
                del self.in_flight[me]
                index += kind.clients
        finally:
            close()

    def stop(self, grace: float) -> None:
        self.stopping.set()
        deadline = time.monotonic() + grace
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        now = time.monotonic()
        for kind, since in list(self.in_flight.values()):
            self.tally.add(kind, "lost", f"no answer after {now - since:.0f} s, at the end of the run", now - since)
