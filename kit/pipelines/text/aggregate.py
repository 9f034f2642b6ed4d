"""Turn per-chunk logits into probabilities and one score for the whole text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def label_probabilities(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis: each label's probability."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.size == 0:
        raise ValueError("no logits to turn into probabilities")
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (shifted / shifted.sum(axis=-1, keepdims=True)).astype(np.float32)


def ai_probability(logits: np.ndarray, ai_label_index: int = 0) -> np.ndarray:
    """The AI-generated label's column of the softmax (RADAR: index 0)."""
    return label_probabilities(logits)[..., ai_label_index]


def weighted_mean(scores: Sequence[float] | np.ndarray, spans: Sequence[tuple[int, int]]) -> float | np.ndarray:
    """Mean of chunk scores weighted by chunk length in characters: a float for one score per chunk, an array
    (one mean per label) for a row of scores per chunk.

    A 20-character tail chunk carries little evidence; weighting by length keeps it from counting
    as much as a full 300-character chunk.
    """
    if len(scores) == 0 or len(scores) != len(spans):
        raise ValueError(f"need one score per span, got {len(scores)} scores for {len(spans)} spans")
    weights = np.array([end - start for start, end in spans], dtype=np.float64)
    mean = weights @ np.asarray(scores, dtype=np.float64) / weights.sum()
    return float(mean) if mean.ndim == 0 else mean.astype(np.float32)
