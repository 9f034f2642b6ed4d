"""The door's memory after a flood: given back, not kept at the flood's mark.

A flood of requests makes the door hold thousands of requests' objects at once. Freed, they leave holes: Python's
own allocator (pymalloc) keeps every 1 MiB arena that a few longer-lived objects still hold, and glibc keeps free
chunks inside its heap, returning only the heap's top. So each flood left the door tens of MB larger, for good.
On glibc's malloc for every object (PYTHONMALLOC=malloc) the holes are glibc's alone, and malloc_trim(0) gives their
whole free pages back to the system; the door trims every TRIM_EVERY_S seconds (a few ms when there is nothing to
give back). docs/RELIABILITY.md has the measurements and the trade.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys

ALLOCATOR_ENV = "PYTHONMALLOC"
TRIM_EVERY_S = 10.0


def on_malloc() -> None:
    """Runs this process again on glibc's malloc (PYTHONMALLOC is read only at start), unless PYTHONMALLOC is set:
    an operator's choice, or this process already run again. Call it first thing, before anything is imported."""
    if os.environ.get(ALLOCATOR_ENV):
        return
    os.environ[ALLOCATOR_ENV] = "malloc"
    os.execv(sys.executable, sys.orig_argv)


def malloc_trim():
    """glibc's malloc_trim, or None where the C library has none (musl, macOS): nothing to trim there."""
    return getattr(ctypes.CDLL(None), "malloc_trim", None)


async def trim_every(seconds: float = TRIM_EVERY_S) -> None:
    """Gives the C heap's free pages back to the system every `seconds`, until cancelled."""
    trim = malloc_trim()
    if trim is None:
        return
    while True:
        await asyncio.sleep(seconds)
        trim(0)
