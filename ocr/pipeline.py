"""The OCR pipeline over three models, whatever runs them: Triton BLS in the `ocr` and `health_code`
adapters, or ONNX Runtime in this process (kit.runners.onnx: tests, baselines). Model calls are
awaited, so the recogniser requests of one image (one per width bucket) are all in flight at once
and meet other images' in the batcher.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ocr.detect import Page, detect, prepare, rescaled_size, resized, to_original
from ocr.recognize import apply_angles, cls_batch, crop_text, ctc_decode, grow_box, rec_groups
from ocr.settings import OcrSettings


class Engines(Protocol):
    """The three models; each call is one batched request."""

    async def detect(self, images: np.ndarray) -> np.ndarray: ...  # uint8 [n,H,W,3] -> prob_map [n,1,H,W]

    async def classify(self, crops: np.ndarray) -> np.ndarray: ...  # [n,3,48,192] -> probs [n,2]

    async def recognize(self, crops: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...  # -> indices, probs [n,T]


@dataclass
class OcrResult:
    texts: list[str]
    scores: np.ndarray  # float32 [n]
    boxes: np.ndarray  # float32 [n, 4, 2], pixel corners in the original image

    @classmethod
    def empty(cls) -> OcrResult:
        return cls([], np.zeros(0, np.float32), np.zeros((0, 4, 2), np.float32))


class OcrPipeline:
    def __init__(self, characters: list[str], settings: OcrSettings = OcrSettings()):
        """`characters`: the recogniser's class table (ocr.recognize.character_table)."""
        self.characters = characters
        self.settings = settings

    async def find_text(self, image: np.ndarray, engines: Engines) -> tuple[Page, list[np.ndarray], list[np.ndarray]]:
        """The page, its text boxes in reading order (page pixels) and the crops cut for the recogniser."""
        s = self.settings
        page = prepare(image, s)
        boxes = detect(page, await engines.detect(page.tensor), s.db)
        size = rescaled_size(page, boxes, s)
        if size is not None:
            page = resized(page, size, s)
            boxes = detect(page, await engines.detect(page.tensor), s.db)
        return page, boxes, [crop_text(page.image, grow_box(box, s.crop_pad, page.image.shape)) for box in boxes]

    async def read(self, image: np.ndarray, engines: Engines) -> OcrResult:
        """Lines in reading order with score >= text_score, for a BGR uint8 picture."""
        s = self.settings
        page, boxes, crops = await self.find_text(image, engines)
        if not boxes:
            return OcrResult.empty()
        if s.use_cls:
            parts = [crops[i : i + s.max_batch] for i in range(0, len(crops), s.max_batch)]
            probs = await asyncio.gather(*(engines.classify(cls_batch(part)) for part in parts))
            crops = apply_angles(crops, np.concatenate(probs))
        groups = rec_groups(crops, s.rec_buckets, s.max_batch)
        outputs = await asyncio.gather(*(engines.recognize(group.batch) for group in groups))
        decoded: list[tuple[str, float]] = [("", 0.0)] * len(crops)
        for group, (indices, probs) in zip(groups, outputs):
            for index, line in zip(group.indices, ctc_decode(indices, probs, self.characters)):
                decoded[index] = line
        keep = [i for i, (_, score) in enumerate(decoded) if score >= s.text_score]
        return OcrResult(
            [decoded[i][0] for i in keep],
            np.array([decoded[i][1] for i in keep], dtype=np.float32),
            to_original(page, [boxes[i] for i in keep]),
        )
