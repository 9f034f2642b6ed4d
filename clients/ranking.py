"""Rank documents against a query with a cross-encoder a spec brings (`kit add NAME --task text-ranking`,
docs/MODELS.md): each document's relevance (its chunks' best, or mean) and each chunk's, most relevant first.

    python -m clients.ranking --model reranker --query "When does the committee meet?" notes/*.txt
    python -m clients.ranking --model reranker --protocol door --url http://localhost:8080 --query "..." --json *.txt

Over Triton's gRPC or HTTP each document is one request (QUERY and DOCUMENT), `concurrency` in flight, so that the
pairs model merges their chunks with other clients'; through the door all go in one call of the model's route.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import numpy as np

from clients.base import DEFAULT_URLS, SpecModelClient, report_all, spec_model_parser

RANKING_OUTPUTS = ["SCORE", "CHUNK_SCORES", "CHUNK_SPANS"]


@dataclass
class RankedDocument:
    """A document's relevance to the query, and each chunk's (start, end, score): offsets into the document."""

    index: int
    score: float
    chunks: list[tuple[int, int, float]]

    @classmethod
    def from_outputs(cls, index: int, outputs: dict[str, np.ndarray]) -> RankedDocument:
        spans = outputs["CHUNK_SPANS"].reshape(-1, 2)
        chunks = [(int(s), int(e), float(c)) for (s, e), c in zip(spans, outputs["CHUNK_SCORES"].reshape(-1))]
        return cls(index, float(outputs["SCORE"].reshape(-1)[0]), chunks)

    @classmethod
    def from_answer(cls, answer: dict) -> RankedDocument:
        """From one document of the door's JSON answer."""
        return cls(answer["index"], answer["score"], [(c["start"], c["end"], c["score"]) for c in answer["chunks"]])


def pair_tensors(query: str, document: str) -> dict[str, np.ndarray]:
    return {
        "QUERY": np.array([query.encode("utf-8")], dtype=np.object_),
        "DOCUMENT": np.array([document.encode("utf-8")], dtype=np.object_),
    }


class TextRankingClient(SpecModelClient):
    """A cross-encoder's client: documents by their relevance to a query."""

    OUTPUTS = RANKING_OUTPUTS

    def rank(self, query: str, documents: list[str]) -> list[RankedDocument]:
        """Every document, most relevant first (`index`: its place in `documents`)."""
        if self.door:
            answer = self.door.post(self.route, {"query": query, "documents": documents})
            ranked = [RankedDocument.from_answer(item) for item in answer["documents"]]
        else:
            answers = self.map(lambda document: self.infer(pair_tensors(query, document)), documents)
            for answer in answers:
                if isinstance(answer, Exception):
                    raise answer
            ranked = [RankedDocument.from_outputs(i, outputs) for i, outputs in enumerate(answers)]
        return sorted(ranked, key=lambda document: -document.score)


def main(argv: list[str] | None = None) -> int:
    parser = spec_model_parser(__doc__, "files")
    parser.add_argument("--query", required=True, help="the query the files are ranked against")
    args = parser.parse_args(argv)
    url = args.url or DEFAULT_URLS[args.protocol]
    documents = [path.read_text(encoding="utf-8", errors="strict") for path in args.files]
    client = TextRankingClient(args.model, url, args.protocol, args.concurrency, api_key=args.api_key, route=args.route)

    def ranked(items):
        return sorted(client.rank(args.query, items), key=lambda document: document.index)

    def report(path, result) -> str:
        if args.json:
            chunks = [{"start": start, "end": end, "score": score} for start, end, score in result.chunks]
            return json.dumps({"file": str(path), "score": result.score, "chunks": chunks})
        return f"{path}: {result.score:.4f} ({len(result.chunks)} chunks)"

    return report_all(client, ranked, documents, args.files, report)


if __name__ == "__main__":
    sys.exit(main())
