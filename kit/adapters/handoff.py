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
from concurrent.futures import ThreadPoolExecutor

MAX_CALL_THREADS = 64  # BLS calls in flight at once per instance, at most


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
    """An asyncio loop on a thread of its own, for the work `execute` hands off (BLS calls and their answers).

    The Python backend's `async_exec` waits for each BLS call in a thread of the loop's default executor, which asyncio
    sizes by the machine (6 threads on 2 cores): that many calls in flight at once, whatever the window allows. A
    user pipeline's entry, one network call per request, served 0.3-0.5 x its network alone at 64 clients so; `calls`
    sizes the executor (at most MAX_CALL_THREADS; the threads only wait). None keeps asyncio's default, as the text
    classifier's texts model does unless its `call_threads` says otherwise (docs/PERFORMANCE.md: more calls helped the
    simulated H100 at 64 clients and stalled it at 256).
    """

    def __init__(self, name: str, calls: int | None = None):
        self.loop = asyncio.new_event_loop()
        if calls is not None:
            threads = max(1, min(calls, MAX_CALL_THREADS))
            self.loop.set_default_executor(ThreadPoolExecutor(threads, thread_name_prefix=f"{name}-call"))
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, work: Coroutine) -> None:
        asyncio.run_coroutine_threadsafe(work, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
