"""RADAR text detection: validate, chunk, tokenize into length buckets, aggregate.

The entry model's `model.py` only moves tensors; everything here runs and is tested without Triton.
The length buckets come from `length_buckets`, which the repository builder calls on the token
lengths that the export measured (token_lengths.json), so the pipeline is handed them ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer

from kit.pipelines.batching.buckets import bucket_for, choose_buckets, pad_batch
from kit.pipelines.errors import InputError
from kit.pipelines.text.aggregate import ai_probability, weighted_mean
from kit.pipelines.text.chunking import split_text, split_to_token_limit

DEFAULT_MAX_CHARS = 300


@dataclass
class ChunkGroup:
    """Chunks of one length bucket, ready to send to the classifier as one request."""

    indices: list[int]
    input_ids: np.ndarray
    attention_mask: np.ndarray


@dataclass
class TextPlan:
    """A text's chunks (character spans) and their token ids grouped into classifier requests."""

    spans: list[tuple[int, int]]
    groups: list[ChunkGroup]


@dataclass
class Result:
    score: float
    chunk_scores: np.ndarray
    spans: np.ndarray


def decode_text(raw: bytes, max_bytes: int) -> str:
    """Checks that cost nothing come first, before any tokenization."""
    if len(raw) > max_bytes:
        raise InputError(f"TEXT is {len(raw)} bytes; the maximum is {max_bytes} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"TEXT is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    if not text.strip():
        raise InputError("TEXT is empty or only whitespace; there is nothing to classify")
    return text


def decode_request_text(tensor: np.ndarray, max_bytes: int) -> str:
    """The one text of the entry model's TEXT input (BYTES [1]), decoded as decode_text does."""
    items = tensor.reshape(-1)
    if items.size != 1:
        raise InputError(f"TEXT must hold exactly one text, got {items.size}")
    return decode_text(bytes(items[0]), max_bytes)


@dataclass
class RadarPipeline:
    """`max_batch`: chunks per classifier request, the classifier's max_batch_size."""

    tokenizer: Tokenizer
    max_tokens: int
    pad_id: int
    buckets: list[int]
    max_chars: int = DEFAULT_MAX_CHARS
    max_batch: int = 32
    ai_label_index: int = 0

    def __post_init__(self) -> None:
        if self.buckets[-1] != self.max_tokens:
            raise ValueError(f"the largest bucket {self.buckets[-1]} must equal max_tokens {self.max_tokens}")

    def plan(self, text: str) -> TextPlan:
        spans, ids = chunk_text(self.tokenizer, text, self.max_chars, self.max_tokens)
        by_bucket: dict[int, list[int]] = {}
        for index, chunk_ids in enumerate(ids):
            by_bucket.setdefault(bucket_for(len(chunk_ids), self.buckets), []).append(index)
        groups = []
        for length, indices in sorted(by_bucket.items()):
            for start in range(0, len(indices), self.max_batch):
                part = indices[start : start + self.max_batch]
                input_ids, mask = pad_batch([ids[i] for i in part], length, self.pad_id)
                groups.append(ChunkGroup(part, input_ids, mask))
        return TextPlan(spans, groups)

    def finish(self, plan: TextPlan, logits: list[np.ndarray]) -> Result:
        """Per-chunk AI probabilities in text order and their length-weighted mean."""
        scores = np.zeros(len(plan.spans), dtype=np.float32)
        for group, group_logits in zip(plan.groups, logits):
            scores[group.indices] = ai_probability(group_logits, self.ai_label_index)
        return Result(
            score=weighted_mean(scores, plan.spans),
            chunk_scores=scores,
            spans=np.asarray(plan.spans, dtype=np.int32).reshape(-1, 2),
        )


def chunk_text(tokenizer: Tokenizer, text: str, max_chars: int, max_tokens: int) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Spans of at most max_chars characters and max_tokens tokens, with their token ids."""
    spans = split_text(text, max_chars)
    encodings = tokenizer.encode_batch([text[s:e] for s, e in spans])
    if any(len(e.ids) > max_tokens for e in encodings):
        spans = split_to_token_limit(text, spans, lambda chunk: len(tokenizer.encode(chunk).ids), max_tokens)
        encodings = tokenizer.encode_batch([text[s:e] for s, e in spans])
    return spans, [e.ids for e in encodings]


def chunk_token_lengths(tokenizer: Tokenizer, texts: Sequence[str], max_chars: int, max_tokens: int) -> list[int]:
    """Token count of every chunk of `texts`, chunked as the pipeline chunks: what buckets are chosen from."""
    return [len(ids) for text in texts for ids in chunk_text(tokenizer, text, max_chars, max_tokens)[1]]


def length_buckets(lengths: Sequence[int], count: int, max_tokens: int) -> list[int]:
    """At most `count` padded lengths, the last `max_tokens`, that waste the least padding on `lengths`."""
    return choose_buckets(lengths, count, max_tokens)
