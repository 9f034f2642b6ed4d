"""The served-numerics canary: the export's golden set run through the served `radar` model.

The export records a few texts of one chunk each with the source model's AI probability for each
(PyTorch FP32) and the tolerance the served path must meet (`canary` in export.json). The repository
builder hands that section to the `radar` model's config as the parameter `canary`
(kit.control.text_task), so whoever reads the served config gets it through Triton, not a file system.
Each text's served SCORE is its chunk's probability (kit.pipelines.text.pipeline), so a wrong precision,
a stale engine or a broken stub moves it beyond the tolerance, while padding and batching do not.
The front door runs it at start and periodically (door.canary).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass


class CanaryError(ValueError):
    """The golden set is malformed; the message says which part."""


@dataclass(frozen=True)
class GoldenSet:
    texts: tuple[str, ...]
    scores: tuple[float, ...]  # the source model's AI probability of each text
    tolerance: float  # the largest |served - source| that passes


@dataclass(frozen=True)
class Report:
    drifts: tuple[float, ...]  # |served - source| per text; inf where the served score is not a number
    max_drift: float
    worst_text: str
    tolerance: float
    ok: bool


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def golden_set(section: object) -> GoldenSet:
    """The golden set from export.json's `canary` section; keys beyond the three it needs are ignored."""
    if not isinstance(section, dict):
        raise CanaryError(f"the canary must be an object, not {type(section).__name__}")
    missing = {"texts", "scores", "tolerance"} - set(section)
    if missing:
        raise CanaryError(f"the canary has no {sorted(missing)}")
    texts, scores, tolerance = section["texts"], section["scores"], section["tolerance"]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
        raise CanaryError("the canary's texts must be a non-empty list of non-empty strings")
    if not isinstance(scores, list) or len(scores) != len(texts):
        raise CanaryError(f"the canary has {len(texts)} texts and needs as many scores, not {scores!r:.80}")
    if not all(is_number(s) and 0 <= s <= 1 for s in scores):
        raise CanaryError(f"the canary's scores must be probabilities in [0, 1], not {scores!r:.80}")
    if not is_number(tolerance) or tolerance <= 0:
        raise CanaryError(f"the canary's tolerance must be a positive number, not {tolerance!r}")
    return GoldenSet(tuple(texts), tuple(float(s) for s in scores), float(tolerance))


def golden_from_parameter(text: str) -> GoldenSet:
    """The golden set from the `radar` config's `canary` parameter (that section as JSON)."""
    try:
        section = json.loads(text)
    except ValueError as exc:
        raise CanaryError(f"the canary parameter is not JSON: {exc}") from None
    return golden_set(section)


def compare(golden: GoldenSet, served: Sequence[float]) -> Report:
    """Each text's drift from its source score and the verdict; a NaN or infinite score drifts without bound."""
    if len(served) != len(golden.texts):
        raise ValueError(f"{len(served)} served scores for {len(golden.texts)} texts")
    drifts = tuple(abs(s - r) if math.isfinite(s) else math.inf for s, r in zip(served, golden.scores))
    worst = max(range(len(drifts)), key=drifts.__getitem__)
    return Report(drifts, drifts[worst], golden.texts[worst], golden.tolerance, drifts[worst] <= golden.tolerance)
