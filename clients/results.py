"""What the clients return, whichever transport carried the request (Triton's gRPC or HTTP, or the door)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RADAR_OUTPUTS = ["SCORE", "CHUNK_SCORES", "CHUNK_SPANS"]
LABELLED_OUTPUTS = ["SCORES", "CHUNK_SCORES", "CHUNK_SPANS"]
EMBEDDING_OUTPUTS = ["EMBEDDING", "CHUNK_EMBEDDINGS", "CHUNK_SPANS"]


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
class LabelledResult:
    """A text classifier's answer (a text-classification spec's model): the most probable label, every label's
    probability over the text, and each chunk's span and label probabilities."""

    label: str
    scores: dict[str, float]
    chunks: list[tuple[int, int, dict[str, float]]]

    @classmethod
    def from_outputs(cls, labels: list[str], outputs: dict[str, np.ndarray]) -> LabelledResult:
        scores = outputs["SCORES"].reshape(-1)
        rows = outputs["CHUNK_SCORES"].reshape(-1, len(labels))
        chunks = [
            (int(s), int(e), dict(zip(labels, map(float, row))))
            for (s, e), row in zip(outputs["CHUNK_SPANS"].reshape(-1, 2), rows)
        ]
        return cls(labels[int(scores.argmax())], dict(zip(labels, map(float, scores))), chunks)

    @classmethod
    def from_answer(cls, answer: dict) -> LabelledResult:
        """From the door's JSON answer."""
        chunks = [(c["start"], c["end"], c["scores"]) for c in answer["chunks"]]
        return cls(answer["label"], answer["scores"], chunks)


@dataclass
class ImageLabelledResult:
    """An image classifier's answer (an image-classification spec's model): the most probable label and every
    label's probability."""

    label: str
    scores: dict[str, float]

    @classmethod
    def from_outputs(cls, labels: list[str], outputs: dict[str, np.ndarray]) -> ImageLabelledResult:
        scores = outputs["SCORES"].reshape(-1)
        return cls(labels[int(scores.argmax())], dict(zip(labels, map(float, scores))))

    @classmethod
    def from_answer(cls, answer: dict) -> ImageLabelledResult:
        """From the door's JSON answer."""
        return cls(answer["label"], answer["scores"])


@dataclass
class EmbeddingResult:
    """A text encoder's answer (a feature-extraction spec's model): the text's embedding, and each chunk's span and
    embedding."""

    embedding: np.ndarray
    chunks: list[tuple[int, int, np.ndarray]]

    @classmethod
    def from_outputs(cls, outputs: dict[str, np.ndarray]) -> EmbeddingResult:
        spans = outputs["CHUNK_SPANS"].reshape(-1, 2)
        rows = outputs["CHUNK_EMBEDDINGS"].reshape(len(spans), -1)
        return cls(outputs["EMBEDDING"].reshape(-1), [(int(s), int(e), row) for (s, e), row in zip(spans, rows)])

    @classmethod
    def from_answer(cls, answer: dict) -> EmbeddingResult:
        """From the door's JSON answer."""
        chunks = [(c["start"], c["end"], np.asarray(c["embedding"], dtype=np.float32)) for c in answer["chunks"]]
        return cls(np.asarray(answer["embedding"], dtype=np.float32), chunks)


@dataclass
class OcrLine:
    text: str
    score: float
    box: list[list[float]]  # 4 corners [x, y], clockwise from top-left, in image pixels
