"""door.shared_memory's extents: no two takers hold the same byte, and what is given back joins up again."""

from __future__ import annotations

import random

import pytest

from door.shared_memory import ALIGN, Extents

SIZE = 1 << 20


def test_taken_extents_never_overlap_and_all_given_back_make_the_region_whole():
    rng = random.Random(7)
    extents, held = Extents(SIZE), []
    for _ in range(5000):
        if held and rng.random() < 0.5:
            extents.give(*held.pop(rng.randrange(len(held))))
        else:
            size = rng.randint(1, SIZE // 8)
            offset = extents.take(size)
            if offset is not None:
                assert offset % ALIGN == 0 and offset + size <= SIZE
                held.append((offset, size))
        spans = sorted((offset, offset + -(-size // ALIGN) * ALIGN) for offset, size in held)
        assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])), spans
        assert sum(length for _, length in extents.free) + sum(end - start for start, end in spans) == SIZE
    for offset, size in held:
        extents.give(offset, size)
    assert extents.free == [(0, SIZE)]


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (0, 2, 1)])
def test_neighbours_given_back_in_any_order_join(order):
    extents = Extents(3 * 4096)
    taken = [extents.take(4096) for _ in range(3)]
    assert taken == [0, 4096, 8192] and extents.take(1) is None  # full: the tensor goes in the message
    for i in order:
        extents.give(taken[i], 4096)
    assert extents.free == [(0, 3 * 4096)]
    assert extents.take(3 * 4096) == 0
