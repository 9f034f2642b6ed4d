"""RADAR text detection around Triton: validate, chunk, tokenize into length buckets, aggregate.

The entry model's `model.py` only moves tensors; everything here runs and is tested without Triton.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from kit.batching.buckets import bucket_for, choose_buckets, pad_batch, padding_waste
from kit.text.aggregate import ai_probability, weighted_mean
from kit.text.chunking import split_text, split_to_token_limit
from kit.text.corpus import sample_texts

DEFAULT_BUCKET_COUNT = 5


class InputError(ValueError):
    """The request itself is invalid; the message says what is wrong and goes back to the client."""


@dataclass
class ChunkGroup:
    """Chunks of one length bucket, ready to send to the classifier as one request."""

    indices: list[int]
    input_ids: np.ndarray
    attention_mask: np.ndarray


@dataclass
class Plan:
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


class RadarPipeline:
    def __init__(
        self,
        tokenizer: Tokenizer,
        max_tokens: int,
        pad_id: int,
        buckets: list[int],
        max_chars: int = 300,
        max_batch: int = 32,
        ai_label_index: int = 0,
    ):
        if buckets[-1] != max_tokens:
            raise ValueError(f"the largest bucket {buckets[-1]} must equal max_tokens {max_tokens}")
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.pad_id = pad_id
        self.buckets = buckets
        self.max_chars = max_chars
        self.max_batch = max_batch
        self.ai_label_index = ai_label_index

    @classmethod
    def from_files(cls, version_dir: Path, buckets: list[int], **kwargs) -> "RadarPipeline":
        meta = json.loads((version_dir / "export.json").read_text())
        return cls(
            Tokenizer.from_file(str(version_dir / "tokenizer.json")),
            max_tokens=int(meta["max_tokens"]),
            pad_id=int(meta["pad_token_id"]),
            buckets=buckets,
            ai_label_index=int(meta.get("ai_label_index", 0)),
            **kwargs,
        )

    def plan(self, text: str) -> Plan:
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
        return Plan(spans, groups)

    def finish(self, plan: Plan, logits: list[np.ndarray]) -> Result:
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


def bucket_parameters(version_dir: Path, max_chars: int = 300, count: int = DEFAULT_BUCKET_COUNT) -> dict[str, str]:
    """Length buckets chosen from this tokenizer's real token counts for chunks of sample texts.

    The sample follows the field report (texts of 100-800 characters) with a multilingual tail.
    """
    meta = json.loads((version_dir / "export.json").read_text())
    tokenizer = Tokenizer.from_file(str(version_dir / "tokenizer.json"))
    max_tokens = int(meta["max_tokens"])
    lengths = [
        len(ids)
        for text in sample_texts(400, 100, 800, seed=1, multilingual=0.05)
        for ids in chunk_text(tokenizer, text, max_chars, max_tokens)[1]
    ]
    buckets = choose_buckets(lengths, count, max_tokens)
    return {"buckets": ",".join(map(str, buckets)), "bucket_padding_waste": f"{padding_waste(lengths, buckets):.4f}"}
