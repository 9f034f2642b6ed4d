"""The window of work in flight and the background loop an entry model hands its batches to."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kit.adapters.handoff import Background, Window


def test_work_waits_while_the_window_is_full_and_goes_in_as_soon_as_it_fits():
    window = Window(8)
    first = window.acquire(6)
    entered = threading.Event()

    def second():
        held = window.acquire(4)
        entered.set()
        window.release(held)

    thread = threading.Thread(target=second)
    thread.start()
    assert not entered.wait(0.2), "6 + 4 units do not fit a window of 8"
    window.release(first)
    assert entered.wait(5), "released units let the waiting work in"
    thread.join(5)


def test_work_larger_than_the_window_goes_alone_and_holds_the_whole_window():
    window = Window(8)
    held = window.acquire(20)
    assert held == 8 and window.used == 8
    window.release(held)
    assert window.used == 0


def test_drain_waits_for_what_is_in_flight_and_says_when_it_timed_out():
    window = Window(4)
    held = window.acquire(3)
    assert not window.drain(0.05)
    threading.Timer(0.1, window.release, [held]).start()
    assert window.drain(5)


def test_a_window_holds_at_least_one_unit():
    with pytest.raises(ValueError, match="at least one"):
        Window(0)


def test_handed_off_work_runs_on_the_loop_while_the_caller_goes_on():
    background = Background("test")
    done = threading.Event()
    started = time.monotonic()

    async def work():
        await asyncio.sleep(0.2)
        done.set()

    background.submit(work())
    assert time.monotonic() - started < 0.1, "submit does not wait for the work"
    assert done.wait(5)
    background.stop()
    assert not background.thread.is_alive()


def test_the_loop_waits_for_as_many_blocking_calls_at_once_as_it_is_sized_for():
    """What the Python backend's BLS `async_exec` does: each call blocks a thread of the loop's default executor. Twelve
    calls that each wait for all twelve finish only if twelve wait at once (asyncio's default, on 2 cores, is 6)."""
    calls = 12
    background = Background("test", calls)
    together = threading.Barrier(calls, timeout=10)
    finished = threading.Event()

    async def work():
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, together.wait) for _ in range(calls)))
        finished.set()

    background.submit(work())
    assert finished.wait(15), "the calls did not all wait at once"
    background.stop()
