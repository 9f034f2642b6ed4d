"""The OCR pipeline over three models, whatever runs them: Triton BLS in `ocr`'s model.py, or
ONNX Runtime in this process (tests). Model calls are awaited, so the recogniser requests of one
image (one per width bucket) are all in flight at once and meet other images' in the batcher.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import onnxruntime as ort

from kit.ocr.detect import DbParams, detect, prepare, to_original
from kit.ocr.recognize import apply_angles, cls_batch, crop_text, ctc_decode, load_characters, rec_groups


class Engines(Protocol):
    """The three models; each call is one batched request."""

    async def detect(self, images: np.ndarray) -> np.ndarray: ...  # uint8 [n,H,W,3] -> prob_map [n,1,H,W]

    async def classify(self, crops: np.ndarray) -> np.ndarray: ...  # [n,3,48,192] -> probs [n,2]

    async def recognize(self, crops: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...  # -> indices, probs [n,T]


def int_list(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


@dataclass(frozen=True)
class OcrSettings:
    det_buckets: tuple[int, ...] = ()
    det_max_padding: float = 0.0
    rec_buckets: tuple[int, ...] = ()
    max_batch: int = 8
    use_cls: bool = True
    text_score: float = 0.5
    db: DbParams = field(default_factory=DbParams)

    @classmethod
    def from_parameters(cls, params: dict[str, str]) -> "OcrSettings":
        """From a Triton config's `parameters` (all strings)."""
        return cls(
            det_buckets=int_list(params.get("det_buckets", "")),
            det_max_padding=float(params.get("det_max_padding", 0)),
            rec_buckets=int_list(params.get("rec_buckets", "")),
            max_batch=int(params.get("max_batch", 8)),
            use_cls=params.get("use_cls", "true").lower() == "true",
            text_score=float(params.get("text_score", 0.5)),
            db=DbParams(box_thresh=float(params.get("box_thresh", 0.5)), unclip_ratio=float(params.get("unclip_ratio", 1.6))),
        )


@dataclass
class OcrResult:
    texts: list[str]
    scores: np.ndarray  # float32 [n]
    boxes: np.ndarray  # float32 [n, 4, 2], pixel corners in the original image

    @classmethod
    def empty(cls) -> "OcrResult":
        return cls([], np.zeros(0, np.float32), np.zeros((0, 4, 2), np.float32))


class OcrPipeline:
    def __init__(self, characters: list[str], settings: OcrSettings = OcrSettings()):
        self.characters = characters
        self.settings = settings

    @classmethod
    def from_files(cls, characters: Path, settings: OcrSettings = OcrSettings()) -> "OcrPipeline":
        return cls(load_characters(characters), settings)

    async def read(self, image: np.ndarray, engines: Engines) -> OcrResult:
        """Lines in reading order with score >= text_score, for a BGR uint8 picture."""
        s = self.settings
        page = prepare(image, s.det_buckets, s.det_max_padding)
        boxes = detect(page, await engines.detect(page.tensor), s.db)
        if not boxes:
            return OcrResult.empty()
        crops = [crop_text(page.image, box) for box in boxes]
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


class LocalEngines:
    """The exported models in this process through ONNX Runtime: for tests and offline use."""

    def __init__(self, artifacts: Path, threads: int = 0):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.sessions = {
            kind: ort.InferenceSession(str(artifacts / kind / "model.onnx"), options, providers=["CPUExecutionProvider"])
            for kind in ("det", "cls", "rec")
        }

    async def detect(self, images: np.ndarray) -> np.ndarray:
        return self.sessions["det"].run(["prob_map"], {"image": images})[0]

    async def classify(self, crops: np.ndarray) -> np.ndarray:
        return self.sessions["cls"].run(["probs"], {"image": crops})[0]

    async def recognize(self, crops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        indices, probs = self.sessions["rec"].run(["char_indices", "char_probs"], {"image": crops})
        return indices, probs
