"""Bucket choice minimises padding (checked against brute force); padding helpers."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.batching.buckets import bucket_for, choose_buckets, pad_batch, padding_waste


def total_padding(lengths, buckets):
    return sum(bucket_for(n, buckets) - n for n in lengths)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=40), st.integers(min_value=1, max_value=4))
def test_chosen_buckets_match_the_brute_force_minimum(lengths, k):
    buckets = choose_buckets(lengths, k, 64, multiple=4)
    assert len(buckets) <= k and buckets[-1] == 64 and buckets == sorted(buckets)
    candidates = sorted({-(-n // 4) * 4 for n in lengths} - {64})
    best = min(
        total_padding(lengths, list(combo) + [64])
        for r in range(0, k)
        for combo in itertools.combinations(candidates, r)
    )
    assert total_padding(lengths, buckets) == best


def test_bucket_for_picks_the_smallest_that_fits_and_names_overflow():
    assert bucket_for(1, [8, 16]) == 8 and bucket_for(8, [8, 16]) == 8 and bucket_for(9, [8, 16]) == 16
    with pytest.raises(ValueError, match="17 exceeds the largest bucket 16"):
        bucket_for(17, [8, 16])


def test_padding_waste_is_the_padded_fraction():
    assert padding_waste([6, 8], [8]) == pytest.approx(2 / 16)


def test_pad_batch_right_pads_with_a_mask():
    ids, mask = pad_batch([[5, 6], [7]], 4, pad_id=1)
    assert ids.tolist() == [[5, 6, 1, 1], [7, 1, 1, 1]]
    assert mask.tolist() == [[1, 1, 0, 0], [1, 0, 0, 0]]
    assert ids.dtype == mask.dtype == np.int64
