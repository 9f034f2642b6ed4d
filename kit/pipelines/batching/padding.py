"""Pad arrays of different shapes into one batch and split the batch's results back per array."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pad_group(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Stack [n_i, *shape_i] arrays into [sum n_i, *max shape], zeros at the end of every axis
    (an image's bottom and right, so its pixels keep their coordinates), and each row's
    valid item shape as int64 [sum n_i, ndim - 1]."""
    shape = tuple(max(dims) for dims in zip(*(a.shape[1:] for a in arrays)))
    batch = np.zeros((sum(len(a) for a in arrays), *shape), dtype=arrays[0].dtype)
    sizes = np.empty((len(batch), len(shape)), dtype=np.int64)
    row = 0
    for array in arrays:
        batch[(slice(row, row + len(array)), *(slice(0, d) for d in array.shape[1:]))] = array
        sizes[row : row + len(array)] = array.shape[1:]
        row += len(array)
    return batch, sizes


def split_rows(output: np.ndarray, counts: Sequence[int]) -> list[np.ndarray]:
    """The output rows of each array, in order (`counts`: rows per array)."""
    if len(output) != sum(counts):
        raise ValueError(f"output has {len(output)} rows for {sum(counts)} inputs")
    return np.split(output, np.cumsum(counts)[:-1])
