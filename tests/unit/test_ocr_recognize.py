"""Crops, angle classification, width buckets and CTC decoding."""

import numpy as np
import pytest

from ocr.recognize import (
    MIN_REC_WIDTH,
    apply_angles,
    cls_batch,
    crop_text,
    ctc_decode,
    grow_box,
    rec_groups,
    rec_width,
)
from tests.profiles import canonical

CHARS = ["blank", "a", "b", "c", " "]
BUCKETS = (320, 448, 576, 768, 1280)


def test_ctc_merges_repeats_drops_blanks_and_averages_the_kept_probabilities():
    indices = np.array([[0, 1, 1, 0, 1, 2, 2, 4, 3, 0]])
    probs = np.array([[0.9, 0.8, 0.7, 0.9, 0.6, 0.5, 0.9, 0.7, 0.4, 0.9]], np.float32)
    ((text, score),) = ctc_decode(indices, probs, CHARS)
    assert text == "aab c"
    assert score == pytest.approx(np.mean([0.8, 0.6, 0.5, 0.7, 0.4]))


def test_ctc_of_only_blanks_is_empty_with_score_zero():
    assert ctc_decode(np.zeros((2, 5), np.int64), np.ones((2, 5), np.float32), CHARS) == [("", 0.0), ("", 0.0)]


@pytest.mark.parametrize("width, expected", [(100, 320), (320, 320), (321, 448), (500, 576), (1280, 1280), (2000, 2016)])
def test_a_crop_runs_at_the_smallest_bucket_that_holds_it(width, expected):
    crop = np.zeros((48, width, 3), np.uint8)
    assert rec_width(crop, BUCKETS) == expected


def test_configured_buckets_start_at_the_recognisers_minimum_width():
    buckets = [int(b) for b in dict(canonical()["ocr"].settings.module)["rec_buckets"].split(",")]
    assert buckets == sorted(buckets) and buckets[0] == MIN_REC_WIDTH and all(b % 32 == 0 for b in buckets)


def test_groups_split_by_width_and_batch_limit_and_keep_indices():
    crops = [np.zeros((48, w, 3), np.uint8) for w in (100, 500, 120, 130, 510, 90)]
    groups = rec_groups(crops, BUCKETS, max_batch=2)
    assert [(g.indices, g.batch.shape) for g in groups] == [
        ([0, 2], (2, 3, 48, 320)),
        ([3, 5], (2, 3, 48, 320)),
        ([1, 4], (2, 3, 48, 576)),
    ]
    assert (groups[0].batch[0, :, :, 100:] == 0).all()  # zero padding right of the scaled crop


def test_crop_of_an_upright_box_is_that_region_and_tall_crops_are_laid_flat():
    image = np.random.default_rng(0).integers(0, 255, (100, 200, 3), dtype=np.uint8)
    box = np.array([[20, 10], [120, 10], [120, 40], [20, 40]], np.float32)
    np.testing.assert_array_equal(crop_text(image, box), image[10:40, 20:120])
    tall = np.array([[20, 10], [40, 10], [40, 90], [20, 90]], np.float32)
    assert crop_text(image, tall).shape == (20, 80, 3)


def test_only_confident_upside_down_crops_are_turned():
    crops = [np.arange(6, dtype=np.uint8).reshape(1, 2, 3)] * 3
    probs = np.array([[0.05, 0.95], [0.2, 0.8], [0.99, 0.01]], np.float32)
    turned = apply_angles(crops, probs)
    np.testing.assert_array_equal(turned[0], crops[0][:, ::-1])
    np.testing.assert_array_equal(turned[1], crops[1])
    np.testing.assert_array_equal(turned[2], crops[2])


def test_classifier_batch_is_fixed_size_and_normalised():
    batch = cls_batch([np.full((30, 60, 3), 255, np.uint8), np.zeros((20, 900, 3), np.uint8)])
    assert batch.shape == (2, 3, 48, 192) and batch.dtype == np.float32
    assert batch[0, :, :, :96].max() == 1.0 and (batch[0, :, :, 96:] == 0).all()
    assert batch[1].min() == -1.0


def test_grow_box_pads_above_and_below_along_the_box_and_stays_in_the_image():
    box = np.array([[10, 20], [110, 20], [110, 40], [10, 40]], np.float32)  # 20 px high
    np.testing.assert_allclose(grow_box(box, 0.3, (100, 200, 3)), [[10, 14], [110, 14], [110, 46], [10, 46]])
    np.testing.assert_array_equal(grow_box(box, 0.0, (100, 200, 3)), box)
    tilted = np.array([[0, 10], [100, 0], [102, 20], [2, 30]], np.float32)  # its "down" is (2, 20)
    np.testing.assert_allclose(grow_box(tilted, 0.5, (100, 200, 3))[2:], [[103, 30], [3, 40]])
    np.testing.assert_allclose(grow_box(box, 2.0, (50, 200, 3))[:, 1], [0, 0, 49, 49])  # clipped
