"""Length buckets: pad variable-length inputs to a few sizes chosen to waste the least compute."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np


def bucket_for(length: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds `length` (`buckets` sorted ascending)."""
    index = bisect.bisect_left(buckets, length)
    if not buckets:
        raise ValueError(f"no buckets to hold length {length}")
    if index == len(buckets):
        raise ValueError(f"length {length} exceeds the largest bucket {buckets[-1]}")
    return buckets[index]


def padding_waste(lengths: Sequence[int], buckets: Sequence[int]) -> float:
    """Fraction of the padded positions that are padding, i.e. compute spent on nothing."""
    padded = sum(bucket_for(n, buckets) for n in lengths)
    return (padded - sum(lengths)) / padded if padded else 0.0


def choose_buckets(lengths: Sequence[int], k: int, max_len: int, multiple: int = 8) -> list[int]:
    """At most `k` bucket sizes, sorted, the last one `max_len`, that minimise total padding.

    Candidates are the observed lengths rounded up to `multiple` (kernels like aligned shapes): an
    optimal bucket can always shrink to the largest rounded length it holds, so nothing is lost.
    Exact dynamic programming: layers[j][c] is the least padding of all lengths up to candidate c
    with j + 1 buckets, c being the largest; ties go to fewer buckets.
    """
    if k < 1 or multiple < 1:
        raise ValueError(f"need k >= 1 and multiple >= 1, got k={k}, multiple={multiple}")
    if len(lengths) and not 1 <= min(lengths) <= max(lengths) <= max_len:
        raise ValueError(f"lengths must lie in [1, {max_len}], got {min(lengths)}..{max(lengths)}")
    counts = np.bincount(np.asarray(lengths, dtype=np.int64), minlength=max_len + 1)
    sizes = np.array(sorted({min(max_len, -(-n // multiple) * multiple) for n in set(lengths)} | {max_len}))
    count_upto = np.cumsum(counts)[sizes]
    total_upto = np.cumsum(counts * np.arange(max_len + 1))[sizes]
    # padding[p, c]: lengths in (sizes[p], sizes[c]] padded to sizes[c]; only p < c is a real choice.
    padding = sizes * (count_upto - count_upto[:, None]) - (total_upto - total_upto[:, None])
    padding = np.where(np.triu(np.ones_like(padding, dtype=bool), 1), padding, np.inf)
    layers, previous = [(sizes * count_upto - total_upto).astype(np.float64)], []
    for _ in range(k - 1):
        totals = layers[-1][:, None] + padding
        previous.append(totals.argmin(axis=0))
        layers.append(totals.min(axis=0))
    last = len(sizes) - 1
    used = min(range(k), key=lambda j: (layers[j][last], j))
    buckets = [int(sizes[last])]
    for layer in reversed(previous[:used]):
        last = layer[last]
        buckets.append(int(sizes[last]))
    return buckets[::-1]


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
