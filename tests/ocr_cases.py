"""Generated OCR test images and the helpers that judge results (shared by unit and served tests)."""

from __future__ import annotations

from samples import scoring
from samples.images import Document, document, health_code

DOCUMENT_SEEDS = range(10)
HEALTH_CODE_COLORS = ["green", "yellow", "red", "unknown"]


def documents() -> list[Document]:
    """Pages of several widths and line counts; two of them JPEG."""
    return [document(seed, fmt="JPEG" if seed in (3, 7) else "PNG") for seed in DOCUMENT_SEEDS]


def health_codes(per_color: int = 3) -> list:
    """`per_color` screenshots of each colour, and pages without a code ('unknown'); every third a JPEG."""
    shots = []
    for color in HEALTH_CODE_COLORS:
        for i in range(per_color):
            seed = 100 + 10 * HEALTH_CODE_COLORS.index(color) + i
            shots.append(health_code(seed, None if color == "unknown" else color, fmt="JPEG" if i == 2 else "PNG"))
    return shots


def squash(text: str) -> str:
    """Text without whitespace: PP-OCR's spaces depend on how much padding a crop had (docs/OCR.md)."""
    return "".join(text.split())


def character_accuracy(predicted: list[list[str]], truth: list[list[str]]) -> float:
    """Spaces ignored: on these PIL-drawn pages spacing is an artefact of the drawing."""
    return scoring.character_accuracy(predicted, truth, spaces=False)


def read_all(client_class, url: str, images: list[bytes]) -> list:
    """Every image's answer from a served OCR client (4 in flight over gRPC); none may be refused."""
    client = client_class(url, "grpc", concurrency=4)
    try:
        answers = client.read_many(images)
    finally:
        client.close()
    for answer in answers:
        assert not isinstance(answer, Exception), answer
    return answers
