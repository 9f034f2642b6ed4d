"""Classify image files with an image classifier a spec brings (`kit add NAME --task image-classification`,
docs/MODELS.md): each image's most probable label and every label's probability.

    python -m clients.image --model pets cat.jpg photos/*.png
    python -m clients.image --model pets --protocol door --url http://localhost:8080 --json *.jpg

Images go as their encoded bytes, whatever their size: the server decodes and preprocesses them as the checkpoint's
processor does, and batches concurrent ones. Over Triton's gRPC or HTTP the label names come from the served entry's
`labels` parameter; through the door they come with each answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from tritonclient.utils import InferenceServerException

from clients.base import DEFAULT_URLS, SpecModelClient, report_all, spec_model_parser
from clients.door import DoorError, b64
from clients.results import ImageLabelledResult
from clients.text import served_labels


class ImageClassifierClient(SpecModelClient):
    """An image-classification spec's client (one image per request): its most probable label and every label's
    probability; `classify_many` keeps `concurrency` in flight."""

    OUTPUTS = ["SCORES"]

    def __init__(self, model: str, url: str, protocol: str = "grpc", *args, **kwargs):
        super().__init__(model, url, protocol, *args, **kwargs)
        self.labels = None if self.door else served_labels(self.clients.get(), model)

    def classify(self, data: bytes) -> ImageLabelledResult:
        if self.door:
            return ImageLabelledResult.from_answer(self.door.post(self.route, {"image": b64(data)}))
        outputs = self.infer({"IMAGE": np.array([[data]], dtype=np.object_)})  # one row of the entry's batch
        return ImageLabelledResult.from_outputs(self.labels, outputs)

    def classify_many(self, images: list[bytes]) -> list[ImageLabelledResult | InferenceServerException | DoorError]:
        return self.map(self.classify, images)


def report(path: Path, result, as_json: bool) -> str:
    if isinstance(result, Exception):
        message = result.message() if isinstance(result, InferenceServerException) else str(result)
        return json.dumps({"file": str(path), "error": message}) if as_json else f"{path}: error: {message}"
    if as_json:
        return json.dumps({"file": str(path), "label": result.label, "scores": result.scores}, ensure_ascii=False)
    scores = ", ".join(f"{label} {score:.4f}" for label, score in result.scores.items())
    return f"{path}: {result.label} ({scores})"


def main(argv: list[str] | None = None) -> int:
    parser = spec_model_parser(__doc__, "images")
    args = parser.parse_args(argv)
    url = args.url or DEFAULT_URLS[args.protocol]
    client = ImageClassifierClient(args.model, url, args.protocol, args.concurrency, api_key=args.api_key, route=args.route)
    images = [path.read_bytes() for path in args.images]
    return report_all(client, client.classify_many, images, args.images, lambda path, result: report(path, result, args.json))


if __name__ == "__main__":
    sys.exit(main())
