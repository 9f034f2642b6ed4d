"""Find the entities of text files with a token classifier a spec brings (`kit add NAME --task token-classification`,
docs/MODELS.md): each entity's type, score, characters in the file and words, a long file read in overlapping windows.

    python -m clients.entities --model entities notes/*.txt
    python -m clients.entities --model entities --protocol door --url http://localhost:8080 --json *.txt

One text per request, `concurrency` in flight, so that the tokens model merges their windows with other clients'.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import numpy as np

from clients.base import DEFAULT_URLS, SpecModelClient, report_all, spec_model_parser
from clients.radar import text_tensor

ENTITY_OUTPUTS = ["ENTITY_LABELS", "ENTITY_SCORES", "ENTITY_SPANS", "ENTITY_WORDS", "CHUNK_SPANS"]


@dataclass(frozen=True)
class Entity:
    """One entity: its type, its tokens' mean score, its characters [start, end) in the text and its words."""

    label: str
    score: float
    start: int
    end: int
    word: str


@dataclass
class Entities:
    """A text's entities in order, and the windows (start, end) it was read in."""

    entities: list[Entity]
    windows: list[tuple[int, int]]

    @classmethod
    def from_outputs(cls, outputs: dict[str, np.ndarray]) -> Entities:
        labels, words = outputs["ENTITY_LABELS"].reshape(-1), outputs["ENTITY_WORDS"].reshape(-1)
        spans, scores = outputs["ENTITY_SPANS"].reshape(-1, 2), outputs["ENTITY_SCORES"].reshape(-1)
        found = [
            Entity(label.decode("utf-8"), float(score), int(start), int(end), word.decode("utf-8"))
            for label, score, (start, end), word in zip(labels, scores, spans, words)
        ]
        return cls(found, [(int(start), int(end)) for start, end in outputs["CHUNK_SPANS"].reshape(-1, 2)])

    @classmethod
    def from_answer(cls, answer: dict) -> Entities:
        """From the door's JSON answer for one text."""
        found = [Entity(e["label"], e["score"], e["start"], e["end"], e["word"]) for e in answer["entities"]]
        return cls(found, [(window["start"], window["end"]) for window in answer["chunks"]])


class TokenClassifierClient(SpecModelClient):
    """A token classifier's client: a text's entities."""

    OUTPUTS = ENTITY_OUTPUTS

    def entities(self, text: str | bytes) -> Entities:
        if self.door:
            plain = text.decode("utf-8") if isinstance(text, bytes) else text
            return Entities.from_answer(self.door.post(self.route, {"text": plain}))
        return Entities.from_outputs(self.infer(text_tensor(text)))

    def entities_many(self, texts: list[str | bytes]) -> list:
        """Each text's entities, or what its request raised."""
        return self.map(self.entities, texts)


def main(argv: list[str] | None = None) -> int:
    parser = spec_model_parser(__doc__, "files")
    args = parser.parse_args(argv)
    url = args.url or DEFAULT_URLS[args.protocol]
    texts = [path.read_text(encoding="utf-8", errors="strict") for path in args.files]
    client = TokenClassifierClient(args.model, url, args.protocol, args.concurrency, api_key=args.api_key, route=args.route)

    def report(path, result) -> str:
        if isinstance(result, Exception):
            return json.dumps({"file": str(path), "error": str(result)}) if args.json else f"{path}: error: {result}"
        if args.json:
            return json.dumps({"file": str(path), "entities": [vars(entity) for entity in result.entities]})
        found = "; ".join(f"{e.label} {e.word!r} [{e.start}, {e.end}) {e.score:.2f}" for e in result.entities)
        return f"{path}: {len(result.entities)} entities ({len(result.windows)} windows){': ' + found if found else ''}"

    return report_all(client, client.entities_many, texts, args.files, report)


if __name__ == "__main__":
    sys.exit(main())
