"""Classify text files with a text classifier a spec brings (`kit add NAME --task text-classification`,
docs/MODELS.md): its most probable label and every label's probability, per file and per chunk; or, with `--embed`,
embed them with a text encoder a spec brings (`--task feature-extraction`): each file's embedding and its chunks'.

    python -m clients.text --model topics essay.txt notes/*.txt
    python -m clients.text --model topics --protocol door --url http://localhost:8080 --json *.txt
    python -m clients.text --model sentences --embed --json notes/*.txt

Over Triton's gRPC or HTTP the label names come from the served entry's `labels` parameter, so that the
client needs nothing but the model's name; through the door they come with each answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tritonclient.utils import InferenceServerException

from clients.base import DEFAULT_URLS, SpecModelClient, report_all, spec_model_parser
from clients.door import DoorError
from clients.radar import text_tensor
from clients.results import EMBEDDING_OUTPUTS, LABELLED_OUTPUTS, EmbeddingResult, LabelledResult


class TextModelClient(SpecModelClient):
    """A text spec's client: one text per request."""

    def ask(self, text: str | bytes) -> dict:
        """The door's JSON answer, or Triton's outputs by name."""
        if self.door:
            return self.door.post(self.route, {"text": text.decode("utf-8") if isinstance(text, bytes) else text})
        return self.infer(text_tensor(text))


class TextClassifierClient(TextModelClient):
    """A text classifier's client: its most probable label and every label's probability, per text and chunk."""

    OUTPUTS = LABELLED_OUTPUTS

    def __init__(self, model: str, url: str, protocol: str = "grpc", *args, **kwargs):
        super().__init__(model, url, protocol, *args, **kwargs)
        self.labels = None if self.door else served_labels(self.clients.get(), model)

    def classify(self, text: str | bytes) -> LabelledResult:
        answer = self.ask(text)
        return LabelledResult.from_answer(answer) if self.door else LabelledResult.from_outputs(self.labels, answer)

    def classify_many(self, texts: list[str | bytes]) -> list[LabelledResult | InferenceServerException | DoorError]:
        return self.map(self.classify, texts)


class TextEmbeddingClient(TextModelClient):
    """A text encoder's client: each text's embedding and its chunks'."""

    OUTPUTS = EMBEDDING_OUTPUTS

    def embed(self, text: str | bytes) -> EmbeddingResult:
        answer = self.ask(text)
        return EmbeddingResult.from_answer(answer) if self.door else EmbeddingResult.from_outputs(answer)

    def embed_many(self, texts: list[str | bytes]) -> list[EmbeddingResult | InferenceServerException | DoorError]:
        return self.map(self.embed, texts)


def served_labels(client, model: str) -> list[str]:
    """The label names the served entry carries (parameter `labels`, a JSON list), from either tritonclient."""
    config = client.get_model_config(model)
    if isinstance(config, dict):  # HTTP: the config as JSON
        parameters = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
    else:
        parameters = {key: value.string_value for key, value in config.config.parameters.items()}
    if "labels" not in parameters:
        raise ValueError(f"{model} is not a classifier's entry: its config has no `labels` (docs/MODELS.md)")
    return json.loads(parameters["labels"])


def report(path: Path, result, as_json: bool) -> str:
    if isinstance(result, Exception):
        message = result.message() if isinstance(result, InferenceServerException) else str(result)
        return json.dumps({"file": str(path), "error": message}) if as_json else f"{path}: error: {message}"
    if isinstance(result, EmbeddingResult):
        if as_json:
            chunks = [{"start": start, "end": end, "embedding": row.tolist()} for start, end, row in result.chunks]
            return json.dumps({"file": str(path), "embedding": result.embedding.tolist(), "chunks": chunks})
        head = ", ".join(f"{value:.4f}" for value in result.embedding[:4])
        return f"{path}: [{head}, ...] ({result.embedding.size} dimensions; {len(result.chunks)} chunks)"
    if as_json:
        chunks = [{"start": start, "end": end, "scores": scores} for start, end, scores in result.chunks]
        return json.dumps({"file": str(path), "label": result.label, "scores": result.scores, "chunks": chunks})
    scores = ", ".join(f"{label} {score:.4f}" for label, score in result.scores.items())
    return f"{path}: {result.label} ({scores}; {len(result.chunks)} chunks)"


def main(argv: list[str] | None = None) -> int:
    parser = spec_model_parser(__doc__, "files")
    parser.add_argument("--embed", action="store_true", help="the model is a text encoder (feature-extraction): embed")
    args = parser.parse_args(argv)
    url = args.url or DEFAULT_URLS[args.protocol]
    texts = [path.read_text(encoding="utf-8", errors="strict") for path in args.files]
    kind = TextEmbeddingClient if args.embed else TextClassifierClient
    client = kind(args.model, url, args.protocol, args.concurrency, api_key=args.api_key, route=args.route)
    many = client.embed_many if args.embed else client.classify_many
    return report_all(client, many, texts, args.files, lambda path, result: report(path, result, args.json))


if __name__ == "__main__":
    sys.exit(main())
