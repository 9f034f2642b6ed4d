"""Token classification (named entities, PII; a token-classification spec, kit.control.token_task) as `transformers`'
token-classification pipeline does it with `aggregation_strategy="simple"` and a `stride`: each token's label is its
most probable one, adjacent tokens of one entity type are grouped into an entity (a `B-` label starts a new one), the
entity's score is its tokens' mean, its word the tokenizer's decoding of its tokens, its offsets the characters of the
original text it covers; `O` is no entity.

A text longer than the model's limit is read in windows of at most `max_tokens` tokens that overlap by `stride` tokens
(the tokenizer's own truncation with a stride, as the pipeline asks for it), so that an entity cut at one window's end
is whole in the next; where windows' entities overlap, the longer is kept (the higher score between equals). Offsets
are the tokenizer's, into the whole text, in every window.

Windows of many texts are planned together and merged into classifier requests by length bucket, as
kit.pipelines.text.pipeline merges chunks (BatchScores: a text is ready once its last window's group has answered).
Everything here runs and is tested without Triton.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tokenizers import Encoding, Tokenizer

from kit.pipelines.text.aggregate import label_probabilities
from kit.pipelines.text.pipeline import BatchPlan, BatchScores, bucket_groups

IGNORED = ("O",)  # the pipeline's default ignore_labels: no entity


@dataclass(frozen=True)
class Entity:
    """One entity: its type (the label without its B-/I- prefix), its tokens' mean score, its characters [start, end)
    in the text and the tokenizer's decoding of its tokens."""

    label: str
    score: float
    start: int
    end: int
    word: str


@dataclass(frozen=True)
class Tagged:
    """One token as classified: its label, that label's probability, its characters and its word (the token's text,
    or the characters it covers where the tokenizer could not name it)."""

    label: str
    score: float
    start: int
    end: int
    word: str


@dataclass
class Entities:
    """A text's entities, in order, the spans of the windows it was read in, and the tokens they took."""

    entities: list[Entity]
    spans: np.ndarray
    tokens: int


def entity_types(labels: Sequence[str]) -> list[str]:
    """The types an entity may have, in the labels' order: each label without its B-/I- prefix, IGNORED left out."""
    return [kind for kind in dict.fromkeys(label.split("-", 1)[-1] for label in labels) if kind not in IGNORED]


def tag_of(label: str) -> tuple[str, str]:
    """A label's B-/I- part and its entity type; a label without a prefix continues an entity (I)."""
    if label.startswith(("B-", "I-")):
        return label[0], label[2:]
    return "I", label


def group(tokens: Sequence[Tagged], decode) -> list[Entity]:
    """Adjacent tokens of one entity type as one entity (a B- label starts another), entities of IGNORED types left
    out: the pipeline's "simple" aggregation. `decode(words)` joins a group's words."""
    groups: list[list[Tagged]] = []
    for token in tokens:
        bi, kind = tag_of(token.label)
        if groups and bi != "B" and tag_of(groups[-1][-1].label)[1] == kind:
            groups[-1].append(token)
        else:
            groups.append([token])
    entities = []
    for members in groups:
        kind = members[0].label.split("-", 1)[-1]
        if kind in IGNORED:
            continue
        score = float(np.nanmean([token.score for token in members]))
        entities.append(Entity(kind, score, members[0].start, members[-1].end, decode([token.word for token in members])))
    return entities


def merge_overlapping(entities: Sequence[Entity]) -> list[Entity]:
    """Entities of overlapping windows by start: of two that overlap, the longer, or the higher score between equals."""
    if not entities:
        return []
    ordered = sorted(entities, key=lambda entity: entity.start)
    kept, previous = [], ordered[0]
    for entity in ordered:
        if previous.start <= entity.start < previous.end:
            length, previous_length = entity.end - entity.start, previous.end - previous.start
            if length > previous_length or length == previous_length and entity.score > previous.score:
                previous = entity
        else:
            kept.append(previous)
            previous = entity
    kept.append(previous)
    return kept


def window_span(window: Encoding) -> tuple[int, int]:
    """The characters a window's real tokens cover ((0, 0) for a window of special tokens alone)."""
    offsets = [offset for offset, special in zip(window.offsets, window.special_tokens_mask) if not special]
    return (offsets[0][0], offsets[-1][1]) if offsets else (0, 0)


@dataclass
class TokenPipeline:
    """`labels`: the classifier's label names in its columns' order; `stride`: the tokens two windows of a long text
    share; `buckets`: padded window lengths, the last the model's token limit; `unk_id`: the unknown token's id, whose
    word is the text it covers; `max_batch`: windows per classifier request."""

    tokenizer: Tokenizer
    max_tokens: int
    pad_id: int
    buckets: list[int]
    labels: Sequence[str]
    stride: int
    unk_id: int | None = None
    max_batch: int = 32
    output: str = "logits"

    def __post_init__(self) -> None:
        if self.buckets[-1] != self.max_tokens:
            raise ValueError(f"the largest bucket {self.buckets[-1]} must equal max_tokens {self.max_tokens}")
        # A copy that truncates with the stride, so that `tokenizer` itself still reads a text whole.
        self.windowing = Tokenizer.from_str(self.tokenizer.to_str())
        self.windowing.no_padding()
        self.windowing.enable_truncation(self.max_tokens, stride=self.stride)
        decoder = self.tokenizer.decoder
        self.decode = decoder.decode if decoder is not None else " ".join

    def windows(self, texts: Sequence[str]) -> list[list[Encoding]]:
        """Each text's windows: the first `max_tokens` tokens (special tokens included), then each next window
        `stride` tokens back from the last one's end."""
        return [[first, *first.overflowing] for first in self.windowing.encode_batch(list(texts))]

    def plan_many(self, texts: Sequence[str]) -> TokenPlan:
        """Every text's windows, merged across texts into classifier requests by length bucket."""
        windows = self.windows(texts)
        owners = [(t, w) for t, text_windows in enumerate(windows) for w in range(len(text_windows))]
        flat = [window for text_windows in windows for window in text_windows]
        groups = bucket_groups([window.ids for window in flat], self.buckets, self.max_batch, self.pad_id)
        spans = [[window_span(window) for window in text_windows] for text_windows in windows]
        tokens = [sum(len(window.ids) for window in text_windows) for text_windows in windows]
        return TokenPlan(spans, owners, groups, tokens, list(texts), flat)

    def tagged(self, text: str, window: Encoding, logits: np.ndarray) -> list[Tagged]:
        """A window's real tokens, each with its most probable label."""
        probabilities = label_probabilities(logits[: len(window.ids)])
        best = probabilities.argmax(axis=-1)
        tokens = []
        for index, (token_id, (start, end), special) in enumerate(zip(window.ids, window.offsets, window.special_tokens_mask)):
            if special:
                continue
            word = text[start:end] if token_id == self.unk_id else self.tokenizer.id_to_token(token_id)
            label = int(best[index])
            tokens.append(Tagged(self.labels[label], float(probabilities[index, label]), start, end, word))
        return tokens

    def entities(self, text: str, windows: Sequence[Encoding], logits: Sequence[np.ndarray]) -> list[Entity]:
        """A text's entities from its windows' logits [tokens, labels]: each window's grouped, then merged where
        windows overlap."""
        found = [e for window, rows in zip(windows, logits) for e in group(self.tagged(text, window, rows), self.decode)]
        return merge_overlapping(found) if len(windows) > 1 else found

    def scores(self, plan: TokenPlan) -> EntityScores:
        return EntityScores(plan, self)


@dataclass
class TokenPlan(BatchPlan):
    """A BatchPlan of windows: the texts and every window's encoding, in the order of `owners`."""

    texts: list[str] | None = None
    windows: list[Encoding] | None = None


class EntityScores(BatchScores):
    """The texts' entities as the classifier answers their windows' groups ([rows, tokens, labels] each): a text is
    ready once every group holding one of its windows has answered."""

    def __init__(self, plan: TokenPlan, pipeline: TokenPipeline):
        super().__init__(plan, 0, None)
        self.pipeline = pipeline
        self.rows: list[np.ndarray | None] = [None] * len(plan.owners)

    def store(self, group: int, logits: np.ndarray) -> None:
        for row, index in enumerate(self.plan.groups[group].indices):
            self.rows[index] = logits[row]

    def result(self, text: int) -> Entities:
        first, last = self.starts[text], self.starts[text + 1]
        found = self.pipeline.entities(self.plan.texts[text], self.plan.windows[first:last], self.rows[first:last])
        spans = np.asarray(self.plan.spans[text], dtype=np.int32).reshape(-1, 2)
        return Entities(found, spans, self.plan.tokens[text])


def window_token_lengths(tokenizer: Tokenizer, texts: Sequence[str], max_tokens: int, stride: int) -> list[int]:
    """The token count of every window of `texts`, as the pipeline reads them: what the length buckets are chosen from."""
    pipeline = TokenPipeline(tokenizer, max_tokens, 0, [max_tokens], (), stride)
    return [len(window.ids) for text_windows in pipeline.windows(texts) for window in text_windows]
