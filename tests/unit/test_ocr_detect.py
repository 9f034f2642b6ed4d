"""Detection pre- and post-processing: sizing, shape buckets, DB boxes from synthetic maps, reading order."""

import numpy as np
import pytest

from ocr.detect import (
    MAX_DET_PIXELS,
    PAD_VALUE,
    boxes_from_map,
    bucket_shape,
    detect,
    limited_size,
    prepare,
    reading_order,
    rescaled_size,
    scaled_size,
    to_original,
)
from ocr.settings import OcrSettings

BUCKETED = OcrSettings(det_buckets=(736, 1312), det_max_padding=0.5)


def probability_map(h, w, rects, value=0.9):
    prob = np.zeros((h, w), np.float32)
    for top, left, bottom, right in rects:
        prob[top:bottom, left:right] = value
    return prob


def test_a_text_kernel_becomes_one_box_grown_by_the_unclip_distance_and_scaled():
    prob = probability_map(100, 200, [(40, 50, 50, 150)])
    (box,) = boxes_from_map(prob, dest=(200, 400))
    # DB grows the kernel by area * 1.6 / perimeter (about 7.3 px here), then scales x2 to dest.
    grow = 2 * (100 * 10 * 1.6 / 220)
    assert box[:, 0].min() == pytest.approx(100 - grow, abs=4) and box[:, 0].max() == pytest.approx(300 + grow, abs=4)
    assert box[:, 1].min() == pytest.approx(80 - grow, abs=4) and box[:, 1].max() == pytest.approx(100 + grow, abs=4)


def test_faint_and_tiny_blobs_are_dropped():
    faint = probability_map(100, 200, [(10, 10, 20, 100)], value=0.35)  # above thresh 0.3, mean below box_thresh 0.5
    tiny = probability_map(100, 200, [(60, 60, 62, 62)])
    assert boxes_from_map(faint + tiny, dest=(100, 200)) == []


def test_reading_order_is_rows_top_down_and_left_to_right_within_a_row():
    def box(x, y):
        return np.array([[x, y], [x + 50, y], [x + 50, y + 20], [x, y + 20]], np.float32)

    boxes = [box(300, 105), box(10, 100), box(10, 200), box(150, 103)]
    assert reading_order(boxes) == [1, 3, 0, 2]


def test_bucket_shape_pads_only_when_padding_is_cheap():
    buckets = (736, 960, 1312)
    assert bucket_shape(736, 1000, buckets, max_padding=0.3) == (736, 1312)  # 24% waste
    assert bucket_shape(736, 1000, buckets, max_padding=0.1) == (736, 1000)
    assert bucket_shape(736, 1400, buckets, max_padding=0.5) == (736, 1400)  # beyond the largest bucket
    assert bucket_shape(736, 960, (), max_padding=0.5) == (736, 960)


def test_prepare_sizes_like_paddleocr_and_pads_with_neutral_grey():
    image = np.full((300, 500, 3), 255, np.uint8)
    page = prepare(image, BUCKETED)
    assert page.map_size == (736, 1216)  # short side to 736, multiples of 32
    assert page.tensor.shape == (1, 736, 1312, 3) and page.tensor.dtype == np.uint8
    assert (page.tensor[0, :, 1216:] == PAD_VALUE).all() and page.padding == pytest.approx(1 - 1216 / 1312)


def test_flat_pictures_are_letterboxed_and_boxes_map_back_to_the_original():
    image = np.full((40, 1200, 3), 255, np.uint8)  # 30:1, flatter than 8:1
    page = prepare(image)
    assert page.top > 0 and page.image.shape[0] == 40 + 2 * page.top
    box = np.array([[100, page.top + 10], [300, page.top + 10], [300, page.top + 30], [100, page.top + 30]], np.float32)
    (back,) = to_original(page, [box])
    np.testing.assert_allclose(back, [[100, 10], [300, 10], [300, 30], [100, 30]], atol=1)


def test_a_tall_strip_cannot_make_a_huge_detector_input():
    page = prepare(np.full((40000, 1, 3), 255, np.uint8))
    assert page.tensor.shape[1] * page.tensor.shape[2] <= MAX_DET_PIXELS
    assert prepare(np.full((2000, 2000, 3), 255, np.uint8)).map_size == (1984, 1984)  # ordinary pictures untouched


def test_detect_ignores_the_padded_part_of_the_map():
    image = np.full((736, 1000, 3), 255, np.uint8)
    page = prepare(image, BUCKETED)
    prob = np.zeros((1, 1, 736, 1312), np.float32)
    prob[0, 0, 100:130, 100:600] = 0.9
    prob[0, 0, 300:330, 1100:1300] = 0.9  # in the padding: must not become a box
    (box,) = detect(page, prob)
    assert box[:, 0].max() < 1000


def test_max_side_sizing_shrinks_wide_pages_and_never_enlarges():
    assert limited_size(270, 1000, 960) == (256, 960)
    assert limited_size(2532, 1170, 960) == (960, 448)  # a phone screenshot at device pixel ratio 3
    assert limited_size(300, 500, 960) == (288, 512)  # small pictures keep their size (to multiples of 32)
    assert scaled_size(1000, 1500, 3.0) == (1344, 1984)  # the longest side stops at 2000 (then to 32s)


def box(top, left, height, width):
    return np.array([[left, top], [left + width, top], [left + width, top + height], [left, top + height]], np.float32)


def test_text_height_sizing_rescales_only_when_the_median_box_is_far_from_the_target():
    settings = OcrSettings(det_sizing="text_height", det_max_side=960, det_text_height=24)
    page = prepare(np.full((300, 1920, 3), 255, np.uint8), settings)
    assert page.map_size == (160, 960)  # first pass: longest side 960, a ratio of 0.5
    # Boxes 20 page px high are 10 detector px high at 0.5: detect again at 24 / 20 = 1.2, which the
    # longest side's limit of 2000 brings down to 1.04.
    assert rescaled_size(page, [box(10 + 30 * i, 10, 20, 400) for i in range(5)], settings) == (320, 2016)
    assert rescaled_size(page, [box(10, 10, 30, 400)] * 3, settings) == (256, 1536)  # 24 / 30 = 0.8
    # 48 page px are 24 at 0.5: the first pass stands; so it does when nothing was found.
    assert rescaled_size(page, [box(10, 10, 48, 400)], settings) is None
    assert rescaled_size(page, [], settings) is None
    assert rescaled_size(page, [box(10, 10, 20, 400)], OcrSettings(det_sizing="max_side")) is None


def test_unknown_sizing_is_refused():
    with pytest.raises(ValueError, match="det_sizing"):
        OcrSettings(det_sizing="bigger")
