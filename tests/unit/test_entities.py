"""Token classification without Triton (kit.pipelines.text.entities), on the exported RADAR tokenizer: windows of a
long text share their stride and cover it, entities read in windows equal the text read whole, texts planned together
answer as each alone, and the grouping and overlap rules are `transformers`' "simple" ones (the served tests hold the
whole to the pipeline itself)."""

import numpy as np
import pytest
from tokenizers import Tokenizer

from kit.pipelines.text.entities import Entity, Tagged, TokenPipeline, group, merge_overlapping, window_token_lengths
from samples.texts import MULTILINGUAL, sample_texts

LABELS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
LIMIT, STRIDE = 48, 12


@pytest.fixture(scope="module")
def tokenizer(radar_artifacts):
    return Tokenizer.from_file(str(radar_artifacts / "tokenizer.json"))


def tagger(tokenizer, limit=LIMIT, max_batch=4) -> TokenPipeline:
    return TokenPipeline(tokenizer, limit, 1, [16, 32, limit] if limit == LIMIT else [limit], LABELS, STRIDE, 3, max_batch)


def token_logits(input_ids: np.ndarray) -> np.ndarray:
    """Each token's logits from its own id alone (entities of one to three tokens: shorter than the stride), as if the
    model read no context: a text's entities then do not depend on the window that reads them."""
    label = np.where(input_ids % 5 == 0, 0, np.where(input_ids % 7 < 3, 0, 1 + 2 * (input_ids % 2) + (input_ids % 3 == 0)))
    label = np.where(input_ids % 4 == 0, 0, label)  # breaks long runs
    return np.eye(len(LABELS), dtype=np.float32)[label] * 4 + (input_ids % 11)[..., None].astype(np.float32) / 100


def answered(pipeline: TokenPipeline, texts):
    plan = pipeline.plan_many(texts)
    scores = pipeline.scores(plan)
    for number, group_ in enumerate(plan.groups):
        scores.add(number, token_logits(group_.input_ids))
    return plan, [scores.result(t) for t in range(len(texts))]


LONG = " ".join(sample_texts(count=3, min_chars=300, max_chars=600, seed=9)) + " " + MULTILINGUAL[0]


def test_windows_share_their_stride_and_cover_every_token_of_a_long_text(tokenizer):
    pipeline = tagger(tokenizer)
    (windows,) = pipeline.windows([LONG])
    whole = tokenizer.encode(LONG, add_special_tokens=False)
    assert len(windows) > 3 and all(len(window.ids) <= LIMIT for window in windows)
    real = [[offset for offset, special in zip(w.offsets, w.special_tokens_mask) if not special] for w in windows]
    for before, after in zip(real, real[1:]):
        assert before[-STRIDE:] == after[:STRIDE], "consecutive windows share `stride` tokens"
    assert real[0] + [offset for offsets in real[1:] for offset in offsets[STRIDE:]] == list(whole.offsets)


def test_entities_read_in_windows_equal_the_text_read_whole(tokenizer):
    """English texts: where byte-level BPE cuts one character into several tokens of the same offsets, two entities
    of one character overlap, and the pipeline's merge across windows (not within one) keeps one of them."""
    texts = sample_texts(count=3, min_chars=700, max_chars=1200, seed=4, multilingual=0.0)
    _, windowed = answered(tagger(tokenizer), texts)
    _, whole = answered(tagger(tokenizer, limit=4096), texts)
    for text, got, want in zip(texts, windowed, whole):
        assert len(got.spans) > 1 and len(want.spans) == 1
        assert got.entities and got.entities == want.entities, text[:40]
        assert all(text[e.start : e.end].strip() for e in got.entities)


def test_texts_planned_together_answer_as_each_alone_in_shared_groups(tokenizer):
    texts = [LONG, "Short text.", MULTILINGUAL[2], "Another short one, of a few words."]
    plan, together = answered(tagger(tokenizer, max_batch=8), texts)
    owners = {plan.owners[i][0] for group_ in plan.groups for i in group_.indices}
    assert len(plan.groups) < len(plan.owners) and len(owners) == len(texts)
    for text, result in zip(texts, together):
        _, (alone,) = answered(tagger(tokenizer), [text])
        assert result.entities == alone.entities
        np.testing.assert_array_equal(result.spans, alone.spans)
        assert result.tokens == alone.tokens == sum(len(w.ids) for w in tagger(tokenizer).windows([text])[0])
    assert window_token_lengths(tokenizer, texts, LIMIT, STRIDE) == [len(w.ids) for w in plan.windows]


def tagged(*labels: str) -> list[Tagged]:
    return [Tagged(label, 0.5 + i / 100, 2 * i, 2 * i + 1, f"w{i}") for i, label in enumerate(labels)]


def test_tokens_group_as_the_simple_strategy_groups_them():
    tokens = tagged("B-PER", "I-PER", "B-PER", "O", "I-LOC", "I-LOC", "I-PER", "MISC", "MISC", "O")
    entities = group(tokens, " ".join)
    assert [(e.label, e.word, e.start, e.end) for e in entities] == [
        ("PER", "w0 w1", 0, 3),  # B- then I- of its type: one entity
        ("PER", "w2", 4, 5),  # a B- starts another
        ("LOC", "w4 w5", 8, 11),  # an I- after O starts one too
        ("PER", "w6", 12, 13),  # an I- of another type
        ("MISC", "w7 w8", 14, 17),  # a label without a prefix continues as I- does
    ]
    assert entities[0].score == pytest.approx(0.505)


def test_of_overlapping_entities_the_longer_or_the_higher_scored_is_kept():
    entities = [
        Entity("PER", 0.9, 0, 4, "a"),
        Entity("PER", 0.5, 0, 9, "ab"),  # same start, longer: kept
        Entity("LOC", 0.4, 12, 15, "c"),
        Entity("LOC", 0.6, 12, 15, "c"),  # as long, higher score: kept
        Entity("LOC", 0.9, 13, 14, "d"),  # inside, shorter: dropped
        Entity("PER", 0.3, 20, 22, "e"),
    ]
    assert merge_overlapping(entities) == [entities[1], entities[3], entities[5]]


def test_an_unknown_token_is_named_by_the_text_it_covers(tokenizer):
    pipeline = tagger(tokenizer)
    (window,) = pipeline.windows(["Ada met Bob."])[0]
    unknown = window.ids[2]
    pipeline.unk_id = unknown
    logits = np.zeros((len(window.ids), len(LABELS)), dtype=np.float32)
    logits[:, 1] = 1.0  # every token a B-PER: one entity each
    words = [e.word for e in pipeline.entities("Ada met Bob.", [window], [logits])]
    start, end = window.offsets[2]
    assert words[1] == "Ada met Bob."[start:end] and words[0] == tokenizer.decoder.decode([tokenizer.id_to_token(window.ids[1])])
