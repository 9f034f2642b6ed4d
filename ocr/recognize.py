"""Text crops: cut and rectify, angle classification, recognition batches in width buckets, CTC decoding.

A crop is scaled to 48 px high keeping its aspect ratio and zero-padded on the right to the
width the recogniser runs at. RapidOCR pads each batch of 6 to its widest member (at least 320);
here each crop goes to the smallest of a few width buckets that holds it, so crops of different
images share batches in Triton's dynamic batcher. The recogniser's output is already reduced to
the best class and its probability per time step (see export/ocr.py), which is all CTC needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from kit.pipelines.batching.buckets import bucket_for

REC_HEIGHT = 48
MIN_REC_WIDTH = 320
CLS_SHAPE = (3, 48, 192)
CLS_THRESH = 0.9
WIDTH_STEP = 32  # crops wider than the largest bucket run at their width rounded up to this


def grow_box(box: np.ndarray, pad: float, shape: tuple[int, ...]) -> np.ndarray:
    """The quadrilateral (clockwise from top-left) grown by `pad` times its height above and below,
    clipped to the image. The detector's boxes hug the glyphs; from such a tight crop, scaled to 48 px
    high, the recogniser reads words run together (PP-OCR was trained on looser crops)."""
    corners = box.astype(np.float32)
    if pad <= 0:
        return corners
    tl, tr, br, bl = corners
    down = (bl - tl + br - tr) / 2  # from the top edge to the bottom one
    grown = np.array([tl - pad * down, tr - pad * down, br + pad * down, bl + pad * down], np.float32)
    return np.clip(grown, 0, [shape[1] - 1, shape[0] - 1])


def crop_text(image: np.ndarray, box: np.ndarray) -> np.ndarray:
    """The quadrilateral warped to an upright rectangle; tall crops turned to lie flat."""
    box = box.astype(np.float32)
    width = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
    height = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
    target = np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float32)
    crop = cv2.warpPerspective(
        image,
        cv2.getPerspectiveTransform(box, target),
        (width, height),
        borderMode=cv2.BORDER_REPLICATE,
        flags=cv2.INTER_CUBIC,
    )
    return np.rot90(crop) if crop.shape[0] / crop.shape[1] >= 1.5 else crop


def normalise(image: np.ndarray) -> np.ndarray:
    """HWC uint8 BGR -> CHW float32 in [-1, 1]."""
    return (image.astype(np.float32).transpose(2, 0, 1) / 255 - 0.5) / 0.5


def scaled_width(crop: np.ndarray, height: int = REC_HEIGHT) -> int:
    return int(math.ceil(height * crop.shape[1] / crop.shape[0]))


def resize_pad(crop: np.ndarray, height: int, width: int) -> np.ndarray:
    resized_w = min(scaled_width(crop, height), width)
    out = np.zeros((3, height, width), dtype=np.float32)
    out[:, :, :resized_w] = normalise(cv2.resize(crop, (resized_w, height)))
    return out


def cls_batch(crops: Sequence[np.ndarray]) -> np.ndarray:
    _, height, width = CLS_SHAPE
    return np.stack([resize_pad(c, height, width) for c in crops]).astype(np.float32)


def apply_angles(crops: list[np.ndarray], probs: np.ndarray, thresh: float = CLS_THRESH) -> list[np.ndarray]:
    """Crops the classifier is sure are upside down (class 1, '180') turned the right way up."""
    flip = (probs.argmax(axis=1) == 1) & (probs.max(axis=1) > thresh)
    return [cv2.rotate(c, cv2.ROTATE_180) if f else c for c, f in zip(crops, flip)]


def rec_width(crop: np.ndarray, buckets: Sequence[int] = ()) -> int:
    """The width a crop runs at: its bucket, or beyond the largest bucket its own width (rounded up)."""
    width = max(MIN_REC_WIDTH, scaled_width(crop))
    if buckets and width <= buckets[-1]:
        return bucket_for(width, buckets)
    return -(-width // WIDTH_STEP) * WIDTH_STEP


def rec_batch(crops: Sequence[np.ndarray], width: int) -> np.ndarray:
    return np.stack([resize_pad(c, REC_HEIGHT, width) for c in crops]).astype(np.float32)


@dataclass
class RecGroup:
    """Crops (by index) that run together at one width: one request to the recogniser."""

    indices: list[int]
    batch: np.ndarray


def rec_groups(crops: Sequence[np.ndarray], buckets: Sequence[int], max_batch: int) -> list[RecGroup]:
    by_width: dict[int, list[int]] = {}
    for index, crop in enumerate(crops):
        by_width.setdefault(rec_width(crop, buckets), []).append(index)
    groups = []
    for width, indices in sorted(by_width.items()):
        for start in range(0, len(indices), max_batch):
            part = indices[start : start + max_batch]
            groups.append(RecGroup(part, rec_batch([crops[i] for i in part], width)))
    return groups


def character_table(dictionary: Sequence[str]) -> list[str]:
    """The recogniser's class table from its dictionary's lines: CTC blank first, then the dictionary, then the space."""
    return ["blank", *dictionary, " "]


def ctc_decode(indices: np.ndarray, probs: np.ndarray, characters: Sequence[str]) -> list[tuple[str, float]]:
    """Greedy CTC: merge repeats, drop blanks (class 0); the score is the mean probability kept.

    `characters` is the full table with the blank at 0 (see `character_table`).
    """
    results = []
    for row, row_probs in zip(np.asarray(indices), np.asarray(probs)):
        keep = np.ones(len(row), dtype=bool)
        keep[1:] = row[1:] != row[:-1]
        keep &= row != 0
        text = "".join(characters[i] for i in row[keep])
        results.append((text, float(np.mean(row_probs[keep], dtype=np.float64)) if keep.any() else 0.0))
    return results
