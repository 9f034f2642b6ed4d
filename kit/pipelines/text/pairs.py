"""Text ranking as a cross-encoder does it (a text-ranking spec, kit.control.ranking_task): a query and a document read
together as one pair of token sequences, the model's one logit its relevance. A document longer than the model's limit
leaves the query whole and is cut into chunks that each fit beside it; every chunk is scored with the query, and the
document's score is the chunks' best (`max`, the default: a passage that answers the query makes the document
relevant) or their length-weighted mean (`mean`).

Pairs of many requests are planned together: their chunks are tokenized in one call and merged into classifier
requests by length bucket, as kit.pipelines.text.pipeline merges texts' chunks, and each pair's result is ready when
its last group has answered (BatchScores). Everything here runs and is tested without Triton.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer

from kit.pipelines.batching.buckets import bucket_for, pad_batch
from kit.pipelines.errors import InputError
from kit.pipelines.text.aggregate import weighted_mean
from kit.pipelines.text.pipeline import BatchPlan, BatchScores, ChunkGroup, chunk_text

AGGREGATIONS = ("max", "mean")


@dataclass
class PairGroup(ChunkGroup):
    """Pairs of one length bucket; `token_type_ids` marks the query's tokens 0 and the document's 1 (BERT's segments)."""

    token_type_ids: np.ndarray | None = None

    def inputs(self, with_types: bool) -> dict[str, np.ndarray]:
        """The graph's inputs: token types only where the graph takes them (a BERT's, not a DistilBERT's)."""
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        return inputs | ({"token_type_ids": self.token_type_ids} if with_types else {})


def sigmoid(logits: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64)))).astype(np.float32)


@dataclass(frozen=True)
class RankHead:
    """What a pair's chunk logits become (kit.pipelines.text.aggregate.Head's part for a cross-encoder): each chunk's
    relevance, the sigmoid of its one logit, as `transformers`' text-classification pipeline and sentence-transformers'
    CrossEncoder score a one-label model; the document's, the chunks' best or their length-weighted mean."""

    aggregation: str = "max"

    def __post_init__(self) -> None:
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation {self.aggregation!r} is not one of {', '.join(AGGREGATIONS)}")

    def chunks(self, logits: np.ndarray) -> np.ndarray:
        return sigmoid(np.asarray(logits)[:, :1])

    def text(self, chunk_values: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        if self.aggregation == "max":
            return chunk_values.max(axis=0)
        return np.asarray(weighted_mean(chunk_values, spans), dtype=np.float32).reshape(-1)


@dataclass
class PairPipeline:
    """`buckets`: padded lengths of whole pairs, the last the model's token limit; `max_chars` > 0 also cuts a
    document's chunks at that many characters; `max_batch`: pairs per classifier request."""

    tokenizer: Tokenizer
    max_tokens: int
    pad_id: int
    buckets: list[int]
    max_chars: int = 0
    max_batch: int = 32
    head: RankHead = RankHead()
    output: str = "logits"

    def __post_init__(self) -> None:
        if self.buckets[-1] != self.max_tokens:
            raise ValueError(f"the largest bucket {self.buckets[-1]} must equal max_tokens {self.max_tokens}")
        processor = self.tokenizer.post_processor
        self.pair_specials = processor.num_special_tokens_to_add(True) if processor else 0
        self.single_specials = processor.num_special_tokens_to_add(False) if processor else 0

    def room(self, query: str) -> int:
        """The tokens a chunk of the document may take beside `query` (with a lone sequence's special tokens, as
        chunk_text counts them); InputError where the query leaves none."""
        query_tokens = len(self.tokenizer.encode(query, add_special_tokens=False).ids)
        room = self.max_tokens - self.pair_specials - query_tokens
        if room < 1:
            raise InputError(
                f"QUERY takes {query_tokens} tokens; with a document beside it the model reads at most {self.max_tokens}"
            )
        return room + self.single_specials

    def plan_many(self, pairs: Sequence[tuple[str, str]]) -> BatchPlan:
        """Every pair's document chunks, each beside its query, grouped into classifier requests across pairs."""
        spans, encodings = [], []
        for query, document in pairs:
            document_spans, _ = chunk_text(self.tokenizer, document, self.max_chars, self.room(query))
            spans.append(document_spans)
            encodings.append([(query, document[start:end]) for start, end in document_spans])
        flat = [pair for pieces in encodings for pair in pieces]
        encoded = self.tokenizer.encode_batch(flat) if flat else []
        owners = [(p, c) for p, pieces in enumerate(encodings) for c in range(len(pieces))]
        tokens = [0] * len(pairs)
        for (pair, _), encoding in zip(owners, encoded):
            tokens[pair] += len(encoding.ids)
        return BatchPlan(spans, owners, self.groups(encoded), tokens)

    def groups(self, encoded: Sequence) -> list[PairGroup]:
        by_bucket: dict[int, list[int]] = {}
        for index, encoding in enumerate(encoded):
            by_bucket.setdefault(bucket_for(len(encoding.ids), self.buckets), []).append(index)
        out = []
        for length, indices in sorted(by_bucket.items()):
            for start in range(0, len(indices), self.max_batch):
                part = indices[start : start + self.max_batch]
                input_ids, mask = pad_batch([encoded[i].ids for i in part], length, self.pad_id)
                types, _ = pad_batch([encoded[i].type_ids for i in part], length, 0)
                out.append(PairGroup(part, input_ids, mask, types))
        return out

    def scores(self, plan: BatchPlan) -> BatchScores:
        """The pairs' results as the classifier answers their groups: `score` is a document's relevance."""
        return BatchScores(plan, 0, self.head)


def pair_token_lengths(tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]], max_chars: int, max_tokens: int) -> list[int]:
    """The token count of every chunk pair of `pairs`, chunked as served: what the length buckets are chosen from."""
    pipeline = PairPipeline(tokenizer, max_tokens, 0, [max_tokens], max_chars)
    return [int(row.sum()) for group in pipeline.plan_many(pairs).groups for row in group.attention_mask]
