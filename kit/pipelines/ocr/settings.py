"""The OCR pipeline's settings: plain dataclasses, apart from the steps, so that reading a model's
settings does not load OpenCV."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DbParams:
    """Differentiable Binarization post-processing of the detector's map (kit.pipelines.ocr.detect)."""

    thresh: float = 0.3
    box_thresh: float = 0.5
    unclip_ratio: float = 1.6
    max_candidates: int = 1000
    min_size: int = 3


@dataclass(frozen=True)
class OcrSettings:
    det_buckets: tuple[int, ...] = ()
    det_max_padding: float = 0.0
    rec_buckets: tuple[int, ...] = ()
    max_batch: int = 8
    use_cls: bool = True
    text_score: float = 0.5
    db: DbParams = field(default_factory=DbParams)
