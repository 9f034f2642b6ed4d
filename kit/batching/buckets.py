"""Length buckets: pad variable-length inputs to a few sizes chosen to waste the least compute."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np


def bucket_for(length: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds `length`."""
    index = bisect.bisect_left(buckets, length)
    if index == len(buckets):
        raise ValueError(f"length {length} exceeds the largest bucket {buckets[-1]}")
    return buckets[index]


def padding_waste(lengths: Sequence[int], buckets: Sequence[int]) -> float:
    """Fraction of the padded positions that are padding, i.e. compute spent on nothing."""
    padded = sum(bucket_for(n, buckets) for n in lengths)
    return (padded - sum(lengths)) / padded if padded else 0.0


def choose_buckets(lengths: Sequence[int], k: int, max_len: int, multiple: int = 8) -> list[int]:
    """At most `k` bucket sizes, the last one `max_len`, that minimise total padding over `lengths`.

    Exact dynamic programming over the candidate sizes (each observed length rounded up to
    `multiple`, since kernels like aligned shapes): cost[j][c] is the least padding for all lengths
    up to candidate c with j buckets, c itself being a bucket.
    """
    if k < 1:
        raise ValueError("need at least one bucket")
    if any(n > max_len for n in lengths):
        raise ValueError(f"a length exceeds max_len {max_len}")
    counts = np.bincount(np.asarray(lengths, dtype=np.int64), minlength=max_len + 1)
    count_upto = np.cumsum(counts)
    total_upto = np.cumsum(counts * np.arange(max_len + 1))
    candidates = sorted({min(max_len, -(-n // multiple) * multiple) for n in set(lengths)} | {max_len})

    def cost(lo: int, hi: int) -> int:
        """Padding of the lengths in (candidates[lo], candidates[hi]] padded to candidates[hi]."""
        size = candidates[hi]
        n = count_upto[size] - (count_upto[candidates[lo]] if lo >= 0 else 0)
        total = total_upto[size] - (total_upto[candidates[lo]] if lo >= 0 else 0)
        return int(size * n - total)

    m = len(candidates)
    inf = float("inf")
    best = [[inf] * m for _ in range(k + 1)]
    choice = [[-1] * m for _ in range(k + 1)]
    for c in range(m):
        best[1][c] = cost(-1, c)
    for j in range(2, k + 1):
        for c in range(m):
            for prev in range(c):
                total = best[j - 1][prev] + cost(prev, c)
                if total < best[j][c]:
                    best[j][c], choice[j][c] = total, prev
    last = m - 1
    j = min(range(1, k + 1), key=lambda j: (best[j][last], j))
    buckets = []
    while last >= 0 and j >= 1:
        buckets.append(candidates[last])
        last, j = choice[j][last], j - 1
    return sorted(buckets)


def pad_batch(sequences: Sequence[Sequence[int]], length: int, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded int64 input_ids and attention_mask of shape [len(sequences), length]."""
    ids = np.full((len(sequences), length), pad_id, dtype=np.int64)
    mask = np.zeros((len(sequences), length), dtype=np.int64)
    for row, sequence in enumerate(sequences):
        if len(sequence) > length:
            raise ValueError(f"sequence of {len(sequence)} tokens does not fit length {length}")
        ids[row, : len(sequence)] = sequence
        mask[row, : len(sequence)] = 1
    return ids, mask
