"""Turn per-chunk graph outputs (a classifier's logits, an encoder's pooled embeddings) into per-chunk values and one
value for the whole text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Head:
    """What a text's chunk outputs become: each label's probability (`softmax`, a classifier's logits), or the outputs
    as they are (an encoder's pooled embeddings); the text's value is the chunks' length-weighted mean, L2-normalised
    where `normalize` (an embedding whose chunks are unit vectors is one again, as sentence-transformers' are)."""

    softmax: bool = True
    normalize: bool = False

    def chunks(self, outputs: np.ndarray) -> np.ndarray:
        return label_probabilities(outputs) if self.softmax else np.asarray(outputs, dtype=np.float32)

    def text(self, chunk_values: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        mean = np.asarray(weighted_mean(chunk_values, spans), dtype=np.float32)
        if not self.normalize:
            return mean
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm > 0 else mean
