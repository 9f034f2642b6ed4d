"""Handing a batch's work to a loop of its own, so that a Python-backend instance takes its next batch while the
last one's answers are still on their way, within a window of work in flight.

Triton gives an instance its next batch when `execute` returns. An entry model that awaited its BLS calls in
`execute` held every request of a batch until the last was answered: how much work reached the next model was
instances x batch, and a request answered early left its slot idle until the whole batch was done. Here
`execute` returns as soon as the batch's work is sent, answering each request later through its response sender
(which a model that is not decoupled may use once per request), and it waits first while the window is full:
what is in flight follows from what the next model can take, and what does not fit waits in Triton's own queue,
first come, first served, under the model's queue policy.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine


class Window:
    """Work units (a classifier's chunks) in flight, at most `capacity`; one piece of work larger than the window
    goes alone. Thread-safe: `acquire` blocks the stub's thread, `release` comes from the loop's."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"a window holds at least one unit, not {capacity}")
        self.capacity, self.used = capacity, 0
        self.changed = threading.Condition()

    def acquire(self, units: int) -> int:
        """Waits until `units` fit (or the window is empty); returns what to release."""
        held = min(units, self.capacity)
        with self.changed:
            self.changed.wait_for(lambda: self.used + held <= self.capacity)
            self.used += held
        return held

    def release(self, held: int) -> None:
        with self.changed:
            self.used -= held
            self.changed.notify_all()

    def drain(self, timeout: float) -> bool:
        """Waits until nothing is in flight; False when `timeout` seconds passed first."""
        with self.changed:
            return self.changed.wait_for(lambda: self.used == 0, timeout)


class Background:
    """An asyncio loop on a thread of its own, for the work `execute` hands off (BLS calls and their answers)."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, work: Coroutine) -> None:
        asyncio.run_coroutine_threadsafe(work, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
