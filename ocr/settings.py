"""The OCR pipeline's settings: plain dataclasses, apart from the steps, so that reading a model's
settings does not load OpenCV."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DbParams:
    """Differentiable Binarization post-processing of the detector's map (ocr.detect)."""

    thresh: float = 0.3
    box_thresh: float = 0.5
    unclip_ratio: float = 1.6
    max_candidates: int = 1000
    min_size: int = 3


SIZINGS = ("rapidocr", "max_side", "text_height")


@dataclass(frozen=True)
class OcrSettings:
    """`det_sizing` is how large the detector sees a picture (ocr.detect): `rapidocr`
    reproduces RapidOCR (short side up to 736), `max_side` brings the longest side to at most
    `det_max_side`, and `text_height` detects at `det_max_side` first, then again at the scale that
    makes the median text box `det_text_height` detector pixels high, when that differs by more than
    `det_rescale_margin`. `crop_pad` grows each box by that share of its height above and below
    before it is cut for the recogniser (the returned boxes are the detector's); 0 is RapidOCR's."""

    det_sizing: str = "rapidocr"
    det_max_side: int = 960
    det_text_height: int = 32  # the height chosen on rendered pages (perf/results/ocr/sizing.json)
    det_rescale_margin: float = 0.25
    crop_pad: float = 0.0
    det_buckets: tuple[int, ...] = ()
    det_max_padding: float = 0.0
    rec_buckets: tuple[int, ...] = ()
    max_batch: int = 8
    use_cls: bool = True
    text_score: float = 0.5
    db: DbParams = field(default_factory=DbParams)

    def __post_init__(self) -> None:
        if self.det_sizing not in SIZINGS:
            raise ValueError(f"det_sizing {self.det_sizing!r} is not one of {SIZINGS}")
