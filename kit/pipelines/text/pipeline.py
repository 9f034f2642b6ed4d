"""Text classification as RADAR does it (and any sequence classifier a spec brings), and text embeddings the same way
(an encoder a feature-extraction spec brings): validate, chunk, tokenize into length buckets, aggregate over the
chunks each label's probability or the embedding (kit.pipelines.text.aggregate.Head).

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
from kit.pipelines.text.aggregate import Head, weighted_mean
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
class BatchPlan:
    """Several texts' chunks: each text's spans, the (text, chunk) each row is, classifier requests that mix
    texts, and each text's token count over its chunks."""

    spans: list[list[tuple[int, int]]]
    owners: list[tuple[int, int]]
    groups: list[ChunkGroup]
    tokens: list[int]


@dataclass
class Result:
    """A text's value (each label's probability, or its embedding) aggregated over its chunks, each chunk's, and the
    chunks' spans; `score` and `chunk_scores` are the columns of one label (RADAR's AI-generated one). `tokens`: the
    tokens the model read for the text, its chunks' together, special tokens included (what an API bills as usage).
    `logits`: a classifier's logits for the text, its chunks' weighted by length (a one-chunk text's are the model's
    own)."""

    values: np.ndarray
    chunk_values: np.ndarray
    spans: np.ndarray
    label: int = 0
    tokens: int = 0
    logits: np.ndarray | None = None  # the graph's outputs before the head, chunks weighted by length (TEI's raw scores)

    @property
    def score(self) -> float:
        return float(self.values[self.label])

    @property
    def chunk_scores(self) -> np.ndarray:
        return self.chunk_values[:, self.label]


def decode_text(raw: bytes, max_bytes: int, name: str = "TEXT") -> str:
    """Checks that cost nothing come first, before any tokenization; errors name the input (`name`)."""
    if len(raw) > max_bytes:
        raise InputError(f"{name} is {len(raw)} bytes; the maximum is {max_bytes} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name} is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    if not text.strip():
        raise InputError(f"{name} is empty or only whitespace; there is nothing to classify")
    return text


def decode_request_text(tensor: np.ndarray, max_bytes: int, name: str = "TEXT") -> str:
    """The one text of an entry model's text input `name` (BYTES [1]), decoded as decode_text does."""
    items = tensor.reshape(-1)
    if items.size != 1:
        raise InputError(f"{name} must hold exactly one text, got {items.size}")
    return decode_text(bytes(items[0]), max_bytes, name)


def decode_request_texts(tensor: np.ndarray, max_bytes: int, max_texts: int, name: str = "TEXT") -> list[str]:
    """The texts of a text input `name` that carries one or more (BYTES [n], n <= `max_texts`), each decoded as
    decode_text does; a bad one fails the whole request, and its error says which (`TEXT 2 ...`) where there are
    several."""
    items = tensor.reshape(-1)
    if not 1 <= items.size <= max_texts:
        raise InputError(f"{name} holds {items.size} texts; a request carries 1 to {max_texts}")
    if items.size == 1:
        return [decode_text(bytes(items[0]), max_bytes, name)]
    return [decode_text(bytes(item), max_bytes, f"{name} {i}") for i, item in enumerate(items)]


def spans_of(text: str, max_chars: int) -> list[tuple[int, int]]:
    """Chunks of at most `max_chars` characters (split_text); with 0, the whole text, which `chunk_text` then splits
    at the model's own token limit."""
    if max_chars:
        return split_text(text, max_chars)
    return [(0, len(text))] if text else []


@dataclass
class TextPipeline:
    """`max_batch`: chunks per classifier request, the classifier's max_batch_size. `max_chars` 0 chunks by the
    model's token limit alone. `ai_label_index`: the label `Result.score` reports. `head`: what the graph's output
    (named `output`) becomes, a classifier's probabilities or an encoder's embedding."""

    tokenizer: Tokenizer
    max_tokens: int
    pad_id: int
    buckets: list[int]
    max_chars: int = DEFAULT_MAX_CHARS
    max_batch: int = 32
    ai_label_index: int = 0
    head: Head = Head()
    output: str = "logits"

    def __post_init__(self) -> None:
        if self.buckets[-1] != self.max_tokens:
            raise ValueError(f"the largest bucket {self.buckets[-1]} must equal max_tokens {self.max_tokens}")

    def plan(self, text: str) -> TextPlan:
        spans, ids = chunk_text(self.tokenizer, text, self.max_chars, self.max_tokens)
        return TextPlan(spans, self.groups(ids))

    def finish(self, plan: TextPlan, logits: list[np.ndarray]) -> Result:
        """Per-chunk values in text order and the text's."""
        raw = np.zeros((len(plan.spans), logits[0].shape[-1]), dtype=np.float32)
        for group, group_logits in zip(plan.groups, logits):
            raw[group.indices] = group_logits
        tokens = sum(int(group.attention_mask.sum()) for group in plan.groups)
        return result_of(self.head.chunks(raw), plan.spans, self.ai_label_index, self.head, tokens, raw)

    def plan_many(self, texts: Sequence[str]) -> BatchPlan:
        """Many texts' chunks, tokenized in one call and merged across texts into classifier requests: one per
        length bucket and `max_batch` chunks, whichever texts they come from (the batched entry model's way to
        send the classifier fewer, fuller requests). `indices` of a group are positions in `owners`."""
        spans = [spans_of(text, self.max_chars) for text in texts]
        pieces = [text[start:end] for text, text_spans in zip(texts, spans) for start, end in text_spans]
        encoded = [e.ids for e in self.tokenizer.encode_batch(pieces)] if pieces else []
        ids, offset = [], 0
        for i, text in enumerate(texts):
            chunk_ids = encoded[offset : offset + len(spans[i])]
            offset += len(spans[i])
            if any(len(c) > self.max_tokens for c in chunk_ids):  # rare: re-split by tokens, as chunk_text does
                spans[i], chunk_ids = chunk_text(self.tokenizer, text, self.max_chars, self.max_tokens)
            ids.append(chunk_ids)
        owners = [(t, c) for t, text_ids in enumerate(ids) for c in range(len(text_ids))]
        flat = [chunk for text_ids in ids for chunk in text_ids]
        tokens = [sum(len(chunk) for chunk in text_ids) for text_ids in ids]
        return BatchPlan(spans, owners, self.groups(flat), tokens)

    def groups(self, ids: Sequence[Sequence[int]]) -> list[ChunkGroup]:
        return bucket_groups(ids, self.buckets, self.max_batch, self.pad_id)

    def scores(self, plan: BatchPlan) -> BatchScores:
        """The many texts' results, gathered as the classifier answers their groups."""
        return BatchScores(plan, self.ai_label_index, self.head)


class BatchScores:
    """The results of a BatchPlan's texts, each ready as soon as every group holding one of its chunks has
    answered: a short text does not wait for the chunks of the long texts it was planned with."""

    def __init__(self, plan: BatchPlan, ai_label_index: int, head: Head):
        self.plan, self.ai_label_index, self.head = plan, ai_label_index, head
        self.values: np.ndarray | None = None  # (chunks, labels), once the first group answers
        self.starts = np.cumsum([0] + [len(text_spans) for text_spans in plan.spans])
        self.waiting: list[set[int]] = [set() for _ in plan.spans]
        for number, group in enumerate(plan.groups):
            for index in group.indices:
                self.waiting[plan.owners[index][0]].add(number)

    def store(self, group: int, logits: np.ndarray) -> None:
        """Group `group`'s rows, as its texts' results read them: the graph's outputs as they are, and through the
        head."""
        if self.values is None:
            self.values = np.zeros((len(self.plan.owners), logits.shape[-1]), dtype=np.float32)
            self.raw = np.zeros_like(self.values)
        self.values[self.plan.groups[group].indices] = self.head.chunks(logits)
        self.raw[self.plan.groups[group].indices] = logits

    def add(self, group: int, logits: np.ndarray) -> list[int]:
        """Group `group`'s logits; the texts this completes."""
        self.store(group, logits)
        done = []
        for text in self.texts_of(group):
            self.waiting[text].discard(group)
            if not self.waiting[text]:
                done.append(text)
        return done

    def texts_of(self, group: int) -> list[int]:
        """The texts with a chunk in group `group`, in order."""
        return list(dict.fromkeys(self.plan.owners[i][0] for i in self.plan.groups[group].indices))

    def result(self, text: int) -> Result:
        rows = slice(self.starts[text], self.starts[text + 1])
        spans, tokens = self.plan.spans[text], self.plan.tokens[text]
        return result_of(self.values[rows], spans, self.ai_label_index, self.head, tokens, self.raw[rows])


def bucket_groups(ids: Sequence[Sequence[int]], buckets: Sequence[int], max_batch: int, pad_id: int) -> list[ChunkGroup]:
    """Token sequences by length bucket, padded, at most `max_batch` to a group; `indices` are positions in `ids`."""
    by_bucket: dict[int, list[int]] = {}
    for index, chunk_ids in enumerate(ids):
        by_bucket.setdefault(bucket_for(len(chunk_ids), buckets), []).append(index)
    out = []
    for length, indices in sorted(by_bucket.items()):
        for start in range(0, len(indices), max_batch):
            part = indices[start : start + max_batch]
            input_ids, mask = pad_batch([ids[i] for i in part], length, pad_id)
            out.append(ChunkGroup(part, input_ids, mask))
    return out


def result_of(scores: np.ndarray, spans: list[tuple[int, int]], label: int, head: Head, tokens: int, raw: np.ndarray) -> Result:
    spans_array = np.asarray(spans, dtype=np.int32).reshape(-1, 2)
    logits = np.asarray(weighted_mean(raw, spans), dtype=np.float32).reshape(-1)
    return Result(head.text(scores, spans), scores, spans_array, label, tokens, logits)


def chunk_text(tokenizer: Tokenizer, text: str, max_chars: int, max_tokens: int) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Spans of at most max_chars characters and max_tokens tokens, with their token ids."""
    spans = spans_of(text, max_chars)
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
