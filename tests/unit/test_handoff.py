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
