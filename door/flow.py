"""What the door measures per model to tell a refused client when to come back.

    Retry-After = ceil((n + 1) / r) seconds, clamped to [1, cap]

n is the number of requests the door has in flight to that model, r the model's answers per second
through the door over the last `window` seconds (or since its first request, when that is sooner):
the time for the work ahead of the caller, and the caller's own, to drain at the recent pace. With
no answer in the window (a flood on a cold door) r is unknown and the answer is 1 s, the shortest
HTTP can say. The kit's clients add their own jitter
on top, so refused clients do not come back in step.

A door of several worker processes (door.cli --workers) keeps a Flow per model in each: a worker's n and r are
both its share of the door's, so their ratio, and Retry-After, stays what one process would say.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

MIN_SPAN = 1.0  # seconds: a rate is not measured over less (a burst of answers at once is not a pace)


class Flow:
    """One model's requests through the door. Used from the event loop only, so it needs no lock."""

    def __init__(self, window: float = 10.0, cap: int = 30, clock: Callable[[], float] = time.monotonic):
        self.window, self.cap, self.clock = window, cap, clock
        self.in_flight = 0
        self.answers: deque[float] = deque()
        self.first: float | None = None
        self.watchers: list[Callable[[int], None]] = []  # told the new in-flight count (door.observe's gauge)

    def start(self) -> None:
        self.in_flight += 1
        self._tell()
        if self.first is None:
            self.first = self.clock()

    def finish(self, answered: bool) -> None:
        """`answered`: the model did the work (a result or its own refusal of bad input), not an overload refusal."""
        self.in_flight -= 1
        self._tell()
        if answered:
            now = self.clock()
            self.answers.append(now)
            self._forget(now)  # here, not only when a refusal asks the rate: a door never refused would keep them all

    def _tell(self) -> None:
        for watcher in self.watchers:
            watcher(self.in_flight)

    def rate(self) -> float | None:
        """Answers per second over the last window; None when there were none."""
        now = self.clock()
        self._forget(now)
        if not self.answers:
            return None
        return len(self.answers) / max(min(self.window, now - self.first), MIN_SPAN)

    def _forget(self, now: float) -> None:
        """Drops the answers older than the window."""
        while self.answers and self.answers[0] < now - self.window:
            self.answers.popleft()

    def retry_after(self) -> int:
        rate = self.rate()
        if rate is None:
            return 1
        return min(self.cap, max(1, math.ceil((self.in_flight + 1) / rate)))
