"""Bucket choice minimises padding (checked against brute force); padding helpers."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.pipelines.batching.buckets import bucket_for, choose_buckets, pad_batch, padding_waste


def total_padding(lengths, buckets):
    return sum(min(b for b in buckets if b >= n) - n for n in lengths)


def brute_force_minimum(lengths, k, max_len, multiple):
    """Try every set of at most k - 1 sizes below max_len that are multiples of `multiple`."""
    sizes = range(multiple, max_len, multiple)
    return min(total_padding(lengths, list(combo) + [max_len]) for r in range(k) for combo in itertools.combinations(sizes, r))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=4),
    st.sampled_from([1, 4, 8]),
)
def test_chosen_buckets_reach_the_brute_force_minimum(lengths, k, multiple):
    max_len = 64 if multiple > 1 else 24
    lengths = [min(n, max_len) for n in lengths]
    buckets = choose_buckets(lengths, k, max_len, multiple=multiple)
    assert len(buckets) <= k and buckets[-1] == max_len and buckets == sorted(set(buckets))
    assert all(b % multiple == 0 for b in buckets[:-1])
    assert total_padding(lengths, buckets) == brute_force_minimum(lengths, k, max_len, multiple)


def test_buckets_follow_clusters_of_lengths_rounded_to_the_multiple():
    lengths = [10] * 50 + [30] * 50 + [500] * 5
    assert choose_buckets(lengths, 3, 512) == [16, 32, 512]
    assert choose_buckets(lengths, 3, 512, multiple=1) == [10, 30, 512]
    assert choose_buckets(lengths, 10, 512, multiple=1) == [10, 30, 500, 512]


def test_no_more_buckets_than_needed_when_extra_ones_save_nothing():
    assert choose_buckets([8, 8, 16], 5, 16) == [8, 16]
    assert choose_buckets([], 3, 512) == [512]


def test_lengths_beyond_max_len_or_no_buckets_are_errors():
    with pytest.raises(ValueError, match=r"\[1, 512\], got 3..600"):
        choose_buckets([3, 600], 3, 512)
    with pytest.raises(ValueError, match=r"\[1, 512\], got 0..3"):
        choose_buckets([0, 3], 3, 512)
    with pytest.raises(ValueError, match="k >= 1"):
        choose_buckets([3], 0, 512)


def test_bucket_for_picks_the_smallest_that_fits_and_names_overflow():
    assert bucket_for(1, [8, 16]) == 8 and bucket_for(8, [8, 16]) == 8 and bucket_for(9, [8, 16]) == 16
    with pytest.raises(ValueError, match="length 17 exceeds the largest bucket 16"):
        bucket_for(17, [8, 16])


def test_padding_waste_is_the_padded_fraction():
    assert padding_waste([6, 8], [8]) == pytest.approx(2 / 16)
    assert padding_waste([3, 10], [4, 16]) == pytest.approx((1 + 6) / 20)
    assert padding_waste([], [8]) == 0.0


def test_pad_batch_right_pads_with_a_mask():
    ids, mask = pad_batch([[5, 6], [7], [1, 2, 3, 4]], 4, pad_id=1)
    assert ids.tolist() == [[5, 6, 1, 1], [7, 1, 1, 1], [1, 2, 3, 4]]
    assert mask.tolist() == [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]]
    assert ids.dtype == mask.dtype == np.int64


def test_pad_batch_rejects_a_sequence_longer_than_the_bucket():
    with pytest.raises(ValueError, match="5 tokens does not fit length 4"):
        pad_batch([[1, 2, 3, 4, 5]], 4, pad_id=0)
