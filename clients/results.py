"""What the clients return, whichever transport carried the request (Triton's gRPC or HTTP, or the door)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RADAR_OUTPUTS = ["SCORE", "CHUNK_SCORES", "CHUNK_SPANS"]


@dataclass
class RadarResult:
    score: float
    chunk_scores: list[float]
    chunk_spans: list[tuple[int, int]]

    @classmethod
    def from_outputs(cls, outputs: dict[str, np.ndarray]) -> RadarResult:
        spans = outputs["CHUNK_SPANS"].reshape(-1, 2)
        return cls(
            score=float(outputs["SCORE"][0]),
            chunk_scores=[float(s) for s in outputs["CHUNK_SCORES"]],
            chunk_spans=[(int(a), int(b)) for a, b in spans],
        )

    @classmethod
    def from_response(cls, response) -> RadarResult:
        """From a tritonclient InferResult, for callers that send their own requests."""
        return cls.from_outputs({name: response.as_numpy(name) for name in RADAR_OUTPUTS})


@dataclass
class OcrLine:
    text: str
    score: float
    box: list[list[float]]  # 4 corners [x, y], clockwise from top-left, in image pixels
