"""Chunking invariants: every chunk fits, spans cover the text in order, nothing lost or repeated."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import ByteLevelBPETokenizer

from kit.text.chunking import split_text, split_to_token_limit
from kit.text.corpus import MULTILINGUAL, sample_texts

PIECES = ["Hello world. ", "How are you? ", "안녕하세요 ", "人工智能。", "👩‍💻", "e\u0301", "\r\n", "   ", "a" * 40, "\n\n"]
texts = st.one_of(
    st.text(max_size=2000),
    st.lists(st.sampled_from(PIECES), max_size=200).map("".join),
)


def assert_valid(text, spans, max_chars):
    assert "".join(text[s:e] for s, e in spans) == text
    if text:
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(0 < e - s <= max_chars for s, e in spans)


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(min_value=1, max_value=400))
def test_chunks_fit_and_cover_the_text_exactly(text, max_chars):
    assert_valid(text, split_text(text, max_chars), max_chars)


def test_sentences_are_kept_whole_when_they_fit():
    sentences = [f"Sentence number {i} is here. " for i in range(40)]
    text = "".join(sentences)
    for s, e in split_text(text, 300):
        assert text[s:e].startswith("Sentence") and text[s:e].endswith(". ")


def test_a_long_sentence_is_split_at_word_boundaries():
    text = " ".join(f"word{i}" for i in range(200)) + "."
    spans = split_text(text, 100)
    assert_valid(text, spans, 100)
    assert all(text[e - 1] == " " for _, e in spans[:-1])


@pytest.mark.parametrize("length, chunks", [(300, 1), (301, 2), (0, 0)])
def test_texts_of_300_and_301_characters(length, chunks):
    text = ("abcde fghij " * 40)[:length]
    assert len(split_text(text, 300)) == chunks


def test_hard_cuts_do_not_split_emoji_sequences_or_combining_marks():
    family = "👩‍👩‍👧‍👦"
    text = family * 200
    spans = split_text(text, 300)
    assert_valid(text, spans, 300)
    assert all(text[e - 1] != "\u200d" and text[e:e + 1] != "\u200d" for _, e in spans[:-1])
    accents = "e\u0301" * 400
    assert all(accents[e] != "\u0301" for _, e in split_text(accents, 301)[:-1])


def test_fifty_thousand_characters_split_fast():
    text = " ".join(sample_texts(100, 600, 700, seed=3))[:50_000]
    start = time.perf_counter()
    spans = split_text(text, 300)
    assert time.perf_counter() - start < 0.1
    assert_valid(text, spans, 300)


def utf8_bytes(text):
    return len(text.encode("utf-8"))


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(min_value=4, max_value=300))
def test_token_limit_splits_further_without_losing_text(text, max_tokens):
    spans = split_to_token_limit(text, split_text(text, 300), utf8_bytes, max_tokens)
    assert_valid(text, spans, 300)
    assert all(utf8_bytes(text[s:e]) <= max_tokens for s, e in spans)


def test_token_limit_with_a_real_byte_level_bpe():
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(sample_texts(50, 200, 400, seed=1), vocab_size=400, show_progress=False)
    count = lambda s: len(tokenizer.encode(s).ids)  # noqa: E731
    text = "".join(MULTILINGUAL) * 10
    spans = split_to_token_limit(text, split_text(text, 300), count, 120)
    assert_valid(text, spans, 300)
    assert max(count(text[s:e]) for s, e in spans) <= 120
    assert max(count(text[s:e]) for s, e in split_text(text, 300)) > 120, "the test text must need splitting"


def test_a_single_character_over_the_limit_is_a_clear_error():
    with pytest.raises(ValueError, match="alone takes more than"):
        split_to_token_limit("😀", [(0, 1)], utf8_bytes, 2)
