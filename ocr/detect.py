"""Text detection around the PP-OCRv4 DB model: sizing and shape buckets before, boxes after.

The page follows RapidOCR: the longest side is brought to at most 2000 px and the shortest to at
least 30, and very flat pictures are letterboxed. How large the detector then sees it is the
setting `det_sizing` (ocr.settings). `rapidocr` scales the short side up to 736 px, as
RapidOCR does (the served results are compared with it in that mode); that blows small crisp text
up 2-3x on wide screenshots, where the boxes come out so tight that the recogniser loses the spaces
between words. `max_side` keeps the longest side at most a limit, and `text_height` detects there
first, then, when the median box is far from the height asked for, once more at the scale that
brings it there: text of every size reaches the detector at about the same height. Sides are
multiples of 32. The scaled picture is then padded (bottom and right) to a shape bucket so that requests of
different sizes can share a batch, but only when the padding costs little: past `max_padding` it
goes at its own size, the lesson of Paddle Serving's dynamic padding. Post-processing is the
Differentiable Binarization recipe: threshold, dilate, contours, minimum-area boxes, score,
unclip, and boxes in reading order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import pyclipper

from kit.pipelines.batching.buckets import bucket_for
from ocr.settings import DbParams, OcrSettings

MAX_SIDE = 2000
MIN_SIDE = 30
LETTERBOX_MIN_HEIGHT = 30
LETTERBOX_RATIO = 8
DET_SHORT_SIDE = 736
MAX_DET_PIXELS = 2048 * 2048  # above any picture's but a tall strip's (about 2016x2016 at most)
PAD_VALUE = 128  # mid-grey: normalises to ~0, what the network's own zero padding looks like


@dataclass
class Page:
    """The picture the detector's boxes refer to, and how to map them back to the original."""

    image: np.ndarray  # resized and letterboxed BGR picture; crops are cut from it
    tensor: np.ndarray  # uint8 [1, H, W, 3]: the scaled picture padded to its bucket
    map_size: tuple[int, int]  # (h, w) of the scaled picture inside the tensor
    scale: tuple[float, float]  # original / page, (y, x)
    top: int  # letterbox rows above the picture
    original: tuple[int, int]  # (h, w)

    @property
    def padding(self) -> float:
        h, w = self.map_size
        return 1 - h * w / (self.tensor.shape[1] * self.tensor.shape[2])


def round32(value: float) -> int:
    """The nearest multiple of 32, at least 32 (a 1x40000 strip still gets a usable height)."""
    return max(32, int(round(value / 32) * 32))


def resize_to(image: np.ndarray, h: int, w: int) -> np.ndarray:
    return cv2.resize(image, (w, h))


def fit_sides(image: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Longest side at most MAX_SIDE, shortest at least MIN_SIDE, each a multiple of 32 when resized."""
    h, w = image.shape[:2]
    scale_y = scale_x = 1.0
    if max(h, w) > MAX_SIDE:
        ratio = MAX_SIDE / max(h, w)
        image = resize_to(image, round32(int(h * ratio)), round32(int(w * ratio)))
        scale_y, scale_x = h / image.shape[0], w / image.shape[1]
    h2, w2 = image.shape[:2]
    if min(h2, w2) < MIN_SIDE:
        ratio = MIN_SIDE / min(h2, w2)
        image = resize_to(image, round32(int(h2 * ratio)), round32(int(w2 * ratio)))
        scale_y, scale_x = scale_y * h2 / image.shape[0], scale_x * w2 / image.shape[1]
    return image, scale_y, scale_x


def letterbox(image: np.ndarray) -> tuple[np.ndarray, int]:
    """Black bands above and below very flat pictures, so text lines keep a usable height."""
    h, w = image.shape[:2]
    if h > LETTERBOX_MIN_HEIGHT and w / h <= LETTERBOX_RATIO:
        return image, 0
    pad = int(abs(max(int(w / LETTERBOX_RATIO), LETTERBOX_MIN_HEIGHT) * 2 - h) / 2)
    return cv2.copyMakeBorder(image, pad, pad, 0, 0, cv2.BORDER_CONSTANT, value=(0, 0, 0)), pad


def det_size(h: int, w: int, short_side: int = DET_SHORT_SIDE) -> tuple[int, int]:
    """Short side scaled up to `short_side`; capped at MAX_DET_PIXELS, which only tall strips reach
    (the letterbox widens flat ones), so that a 1x40000 picture cannot cost a 45632x736 detection."""
    ratio = short_side / min(h, w) if min(h, w) < short_side else 1.0
    h, w = round32(int(h * ratio)), round32(int(w * ratio))
    if h * w > MAX_DET_PIXELS:
        shrink = (MAX_DET_PIXELS / (h * w)) ** 0.5
        h, w = max(32, int(h * shrink) // 32 * 32), max(32, int(w * shrink) // 32 * 32)
    return h, w


def limited_size(h: int, w: int, max_side: int) -> tuple[int, int]:
    """Longest side at most `max_side` (never enlarged), multiples of 32."""
    ratio = min(1.0, max_side / max(h, w))
    return round32(h * ratio), round32(w * ratio)


def scaled_size(h: int, w: int, ratio: float) -> tuple[int, int]:
    """`ratio` times the page, its longest side at most MAX_SIDE, multiples of 32."""
    ratio = min(ratio, MAX_SIDE / max(h, w))
    return round32(h * ratio), round32(w * ratio)


def first_size(h: int, w: int, settings: OcrSettings) -> tuple[int, int]:
    """The detector's size for a page of (h, w) on its first (for most pictures only) pass."""
    if settings.det_sizing == "rapidocr":
        return det_size(h, w)
    return limited_size(h, w, settings.det_max_side)


def text_heights(boxes: Sequence[np.ndarray]) -> np.ndarray:
    """Each box's height (the mean of its left and right sides), in the pixels of its page."""
    corners = np.array(boxes, dtype=np.float32)
    return (np.linalg.norm(corners[:, 0] - corners[:, 3], axis=1) + np.linalg.norm(corners[:, 1] - corners[:, 2], axis=1)) / 2


def rescaled_size(page: Page, boxes: Sequence[np.ndarray], settings: OcrSettings) -> tuple[int, int] | None:
    """Under `text_height`: the detector's size that makes the median box `det_text_height` pixels
    high, or None when the first pass is within `det_rescale_margin` of it (or found nothing)."""
    if settings.det_sizing != "text_height" or not boxes:
        return None
    ratio = settings.det_text_height / max(float(np.median(text_heights(boxes))), 1.0)
    first = page.map_size[0] / page.image.shape[0]
    if abs(ratio / first - 1) <= settings.det_rescale_margin:
        return None
    size = scaled_size(*page.image.shape[:2], ratio)
    return None if size == page.map_size else size


def bucket_shape(h: int, w: int, buckets: Sequence[int], max_padding: float) -> tuple[int, int]:
    """Each side padded to its bucket when the padded area is at most `max_padding` waste."""
    if not buckets or max(h, w) > buckets[-1]:
        return h, w
    bh, bw = bucket_for(h, buckets), bucket_for(w, buckets)
    return (bh, bw) if 1 - h * w / (bh * bw) <= max_padding else (h, w)


def prepare(image: np.ndarray, settings: OcrSettings = OcrSettings()) -> Page:
    """The page and the detector's input for its first pass."""
    original = image.shape[:2]
    page, scale_y, scale_x = fit_sides(image)
    page, top = letterbox(page)
    empty = np.zeros((1, 0, 0, 3), np.uint8)
    return resized(Page(page, empty, (0, 0), (scale_y, scale_x), top, original), first_size(*page.shape[:2], settings), settings)


def resized(page: Page, size: tuple[int, int], settings: OcrSettings) -> Page:
    """`page` with the detector's input at `size`, padded to its bucket when that costs little."""
    h, w = size
    bh, bw = bucket_shape(h, w, settings.det_buckets, settings.det_max_padding)
    tensor = np.full((1, bh, bw, 3), PAD_VALUE, dtype=np.uint8)
    tensor[0, :h, :w] = resize_to(page.image, h, w)
    return Page(page.image, tensor, (h, w), page.scale, page.top, page.original)


def mini_box(contour: np.ndarray) -> tuple[np.ndarray, float]:
    """Corners of the minimum-area rectangle, clockwise from top-left, and its shorter side."""
    rect = cv2.minAreaRect(contour)
    points = sorted(list(cv2.boxPoints(rect)), key=lambda p: p[0])
    left = (0, 1) if points[1][1] > points[0][1] else (1, 0)
    right = (2, 3) if points[3][1] > points[2][1] else (3, 2)
    box = np.array([points[left[0]], points[right[0]], points[right[1]], points[left[1]]])
    return box, min(rect[1])


def box_score(prob: np.ndarray, box: np.ndarray) -> float:
    """Mean probability inside the box: low for boxes the threshold only grazed."""
    h, w = prob.shape
    xmin, xmax = (int(np.clip(v, 0, w - 1)) for v in (np.floor(box[:, 0].min()), np.ceil(box[:, 0].max())))
    ymin, ymax = (int(np.clip(v, 0, h - 1)) for v in (np.floor(box[:, 1].min()), np.ceil(box[:, 1].max())))
    mask = np.zeros((ymax - ymin + 1, xmax - xmin + 1), dtype=np.uint8)
    cv2.fillPoly(mask, (box - np.array([xmin, ymin])).reshape(1, -1, 2).astype(np.int32), 1)
    return cv2.mean(prob[ymin : ymax + 1, xmin : xmax + 1], mask)[0]


def unclip(box: np.ndarray, ratio: float) -> np.ndarray:
    """Grow the shrunk text kernel back by area * ratio / perimeter, as DB was trained."""
    corners = box.astype(np.float64)
    x, y = corners[:, 0], corners[:, 1]
    area = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    perimeter = np.linalg.norm(corners - np.roll(corners, -1, axis=0), axis=1).sum()
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(box, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    return np.array(offset.Execute(area * ratio / perimeter)).reshape(-1, 1, 2)


def boxes_from_map(prob: np.ndarray, dest: tuple[int, int], params: DbParams = DbParams()) -> list[np.ndarray]:
    """Quadrilaterals [4, 2] in `dest` (h, w) pixels from a probability map [h', w']."""
    height, width = prob.shape
    bitmap = cv2.dilate((prob > params.thresh).astype(np.uint8), np.ones((2, 2), np.uint8))
    contours, _ = cv2.findContours(bitmap * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    boxes = []
    for contour in contours[: params.max_candidates]:
        points, short = mini_box(contour)
        if short < params.min_size or box_score(prob, points.reshape(-1, 2)) < params.box_thresh:
            continue
        expanded = unclip(points, params.unclip_ratio)
        if len(expanded) == 0:
            continue
        box, short = mini_box(expanded)
        if short < params.min_size + 2:
            continue
        box[:, 0] = np.clip(np.round(box[:, 0] / width * dest[1]), 0, dest[1])
        box[:, 1] = np.clip(np.round(box[:, 1] / height * dest[0]), 0, dest[0])
        boxes.append(box.astype(np.int32))
    return boxes


def order_corners(points: np.ndarray) -> np.ndarray:
    """Top-left, top-right, bottom-right, bottom-left."""
    by_x = points[np.argsort(points[:, 0]), :]
    left, right = by_x[:2], by_x[2:]
    tl, bl = left[np.argsort(left[:, 1])]
    tr, br = right[np.argsort(right[:, 1])]
    return np.array([tl, tr, br, bl], dtype=np.float32)


def clean_boxes(boxes: list[np.ndarray], shape: tuple[int, int]) -> list[np.ndarray]:
    """Corners ordered and clipped into the page; slivers of 3 px or less dropped."""
    h, w = shape
    kept = []
    for box in boxes:
        box = order_corners(box)
        box[:, 0] = np.clip(box[:, 0], 0, w - 1).astype(np.int32)
        box[:, 1] = np.clip(box[:, 1], 0, h - 1).astype(np.int32)
        if int(np.linalg.norm(box[0] - box[1])) > 3 and int(np.linalg.norm(box[0] - box[3])) > 3:
            kept.append(box)
    return kept


def reading_order(boxes: list[np.ndarray], same_line: float = 10) -> list[int]:
    """Indices top to bottom; boxes whose tops are within `same_line` px read left to right."""
    order = sorted(range(len(boxes)), key=lambda i: (boxes[i][0][1], boxes[i][0][0]))
    for i in range(len(order) - 1):
        for j in range(i, -1, -1):
            a, b = boxes[order[j]][0], boxes[order[j + 1]][0]
            if abs(b[1] - a[1]) < same_line and b[0] < a[0]:
                order[j], order[j + 1] = order[j + 1], order[j]
            else:
                break
    return order


def detect(page: Page, prob_map: np.ndarray, params: DbParams = DbParams()) -> list[np.ndarray]:
    """Boxes in page pixels, in reading order, from the detector's output for `page.tensor`."""
    h, w = page.map_size
    boxes = clean_boxes(boxes_from_map(prob_map[0, 0, :h, :w], page.image.shape[:2], params), page.image.shape[:2])
    return [boxes[i] for i in reading_order(boxes)]


def to_original(page: Page, boxes: list[np.ndarray]) -> np.ndarray:
    """Page boxes mapped back through the letterbox and the resizing, clipped to the original."""
    if not boxes:
        return np.zeros((0, 4, 2), dtype=np.float32)
    out = np.array(boxes, dtype=np.float32)
    out[:, :, 1] -= page.top
    out[:, :, 0] *= page.scale[1]
    out[:, :, 1] *= page.scale[0]
    out = np.maximum(out, 0)
    out[..., 0] = np.minimum(out[..., 0], page.original[1])
    out[..., 1] = np.minimum(out[..., 1], page.original[0])
    return out
