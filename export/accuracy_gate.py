"""The accuracy gate of a graph that is not numerically equivalent to its source (INT8).

A logit tolerance says nothing a user can act on once quantization moves every number a little;
what a detector's users rest decisions on is the probability and the decision at a threshold. So
the gate compares those, on texts in several languages, against the FP32 source model: max and
mean absolute difference of the probability and the share of texts whose decision agrees.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from export.onnx_validate import ValidationError

DECISION_THRESHOLD = 0.5


@dataclass(frozen=True)
class Thresholds:
    """What a user accepts; the defaults suit a detector whose scores are read to two decimals."""

    max_abs_diff: float = 0.05
    mean_abs_diff: float = 0.01
    min_agreement: float = 0.98


@dataclass(frozen=True)
class Agreement:
    """`reference_positive_share`: the share of texts the reference calls AI. Agreement means little
    where nearly every text falls on one side (a random-weight stand-in), so the record says which."""

    texts: int
    max_abs_diff: float
    mean_abs_diff: float
    agreement: float
    reference_positive_share: float

    def failures(self, limits: Thresholds) -> list[str]:
        found = []
        if not np.isfinite(self.max_abs_diff) or self.max_abs_diff > limits.max_abs_diff:
            found.append(f"max abs probability difference {self.max_abs_diff:.4g} > {limits.max_abs_diff:g}")
        if not np.isfinite(self.mean_abs_diff) or self.mean_abs_diff > limits.mean_abs_diff:
            found.append(f"mean abs probability difference {self.mean_abs_diff:.4g} > {limits.mean_abs_diff:g}")
        if self.agreement < limits.min_agreement:
            found.append(f"decision agreement at {DECISION_THRESHOLD} {self.agreement:.4f} < {limits.min_agreement:g}")
        return found

    def record(self, limits: Thresholds) -> dict:
        return {**asdict(self), "decision_threshold": DECISION_THRESHOLD, "thresholds": asdict(limits)}


def agreement(reference: np.ndarray, candidate: np.ndarray) -> Agreement:
    """How closely `candidate` probabilities follow `reference` ones (same texts, same order)."""
    if reference.shape != candidate.shape or reference.ndim != 1:
        raise ValueError(f"probabilities of shapes {reference.shape} and {candidate.shape} cannot be compared")
    diff = np.abs(candidate.astype(np.float64) - reference)
    positive = reference > DECISION_THRESHOLD
    same = (candidate > DECISION_THRESHOLD) == positive
    return Agreement(len(reference), float(np.max(diff)), float(np.mean(diff)), float(np.mean(same)), float(np.mean(positive)))


def require(result: Agreement, limits: Thresholds, what: str) -> None:
    failures = result.failures(limits)
    if failures:
        raise ValidationError(f"{what} fails its accuracy gate on {result.texts} texts: {'; '.join(failures)}")
