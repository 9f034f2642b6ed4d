"""The door's memory after a flood (door.memory): the door runs itself on glibc's malloc, where a trim gives a flood's
freed memory back; on Python's own allocator the same memory stays held."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from door.memory import ALLOCATOR_ENV

# A flood's worth of small objects, one in 200 kept (what outlives a flood), the rest freed; then glibc's trim.
FLOOD = """
import json, sys
from door.memory import malloc_trim, on_malloc
on_malloc()
def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20
flood = [str(i).encode() * 20 for i in range(1_000_000)]
kept = flood[::200]
del flood
held = rss_mb()
malloc_trim()(0)
print(json.dumps({"blocks": sys.getallocatedblocks(), "held_mb": held, "trimmed_mb": rss_mb()}))
"""


def flood(allocator: str | None) -> dict:
    env = {key: value for key, value in os.environ.items() if key != ALLOCATOR_ENV}
    if allocator:
        env[ALLOCATOR_ENV] = allocator
    answer = subprocess.run([sys.executable, "-c", FLOOD], env=env, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(answer.stdout)


def test_the_door_runs_itself_on_malloc_where_a_trim_gives_a_floods_memory_back():
    figures = flood(None)
    assert figures["blocks"] == 0  # pymalloc counts its blocks; on malloc there are none
    assert figures["held_mb"] - figures["trimmed_mb"] > 50, figures


def test_an_allocator_the_operator_chose_is_kept_and_pymalloc_keeps_the_floods_memory():
    figures = flood("pymalloc")
    assert figures["blocks"] > 0
    assert figures["held_mb"] - figures["trimmed_mb"] < 10, figures
