"""Turn per-chunk logits into probabilities and one score for the whole text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def ai_probability(logits: np.ndarray, ai_label_index: int = 0) -> np.ndarray:
    """Softmax over the last axis, the AI-generated label's column (RADAR: index 0)."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.size == 0:
        raise ValueError("no logits to turn into probabilities")
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (shifted[..., ai_label_index] / shifted.sum(axis=-1)).astype(np.float32)


def weighted_mean(scores: Sequence[float], spans: Sequence[tuple[int, int]]) -> float:
    """Mean of chunk scores weighted by chunk length in characters.

    A 20-character tail chunk carries little evidence; weighting by length keeps it from counting
    as much as a full 300-character chunk.
    """
    if len(scores) == 0 or len(scores) != len(spans):
        raise ValueError(f"need one score per span, got {len(scores)} scores for {len(spans)} spans")
    weights = np.array([end - start for start, end in spans], dtype=np.float64)
    return float(np.dot(np.asarray(scores, dtype=np.float64), weights) / weights.sum())
