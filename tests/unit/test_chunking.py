"""Chunking invariants: every chunk fits, spans cover the text in order, nothing lost or repeated,
sentences and words kept whole when they fit, and no user-perceived character cut in two."""

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import ByteLevelBPETokenizer
from tokenizers.processors import RobertaProcessing

from kit.pipelines.text.chunking import split_text, split_to_token_limit

# Pieces that display as one character: a cut inside any of them is a bug when the limit allows.
CLUSTERS = [
    "\r\n",
    "e\u0301",  # e + combining acute
    " \u0301",  # a combining mark on a space: the word boundary before it must move
    "👩\u200d💻",  # ZWJ sequence
    "👍🏽",  # skin-tone modifier
    "1\ufe0f\u20e3",  # keycap: variation selector + enclosing mark (combining class 0)
    "\u1100\u1161\u11a8",  # Hangul syllable as conjoining jamo
    "ก\u0e31",  # Thai vowel sign
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # flag of Scotland (tags)
]
LONGEST_CLUSTER = max(map(len, CLUSTERS))
WORDS = ["Hello world. ", "How are you? ", "안녕하세요 ", "人工智能。", "   ", "a" * 40, "\n\n", " " * 320, "Fine! "]
PIECES = CLUSTERS + WORDS

pieces = st.lists(st.sampled_from(PIECES), max_size=200)
texts = st.one_of(st.text(max_size=2000), pieces.map("".join))


def assert_covers(text, spans, max_chars):
    assert "".join(text[s:e] for s, e in spans) == text
    if text:
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
    else:
        assert spans == []
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(0 < e - s <= max_chars for s, e in spans)


def inside_clusters(parts):
    """Offsets that fall strictly inside a cluster piece, computed from how the text was built."""
    offsets, position = set(), 0
    for part in parts:
        if part in CLUSTERS:
            offsets.update(range(position + 1, position + len(part)))
        position += len(part)
    return offsets


def utf8_bytes(text):
    return len(text.encode("utf-8"))


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(min_value=1, max_value=400))
def test_chunks_fit_and_cover_the_text_exactly(text, max_chars):
    assert_covers(text, split_text(text, max_chars), max_chars)


@settings(max_examples=300, deadline=None)
@given(pieces, st.integers(min_value=LONGEST_CLUSTER, max_value=400))
def test_no_chunk_boundary_falls_inside_a_cluster(parts, max_chars):
    text = "".join(parts)
    spans = split_text(text, max_chars)
    assert_covers(text, spans, max_chars)
    assert not {e for _, e in spans[:-1]} & inside_clusters(parts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=50), st.just("\r\n")), max_size=60), st.integers(min_value=2, max_value=50))
def test_a_crlf_line_break_is_never_split(parts, max_chars):
    text = "".join(parts)
    assert all(text[e - 1 : e + 1] != "\r\n" for _, e in split_text(text, max_chars)[:-1])


sentences = st.lists(st.text(alphabet="abcxyz", min_size=1, max_size=12), min_size=1, max_size=30).map(
    lambda words: " ".join(words).capitalize() + ". "
)


@settings(max_examples=200, deadline=None)
@given(st.lists(sentences, min_size=1, max_size=60), st.integers(min_value=40, max_value=400))
def test_whole_sentences_are_packed_greedily(sentence_list, max_chars):
    sentence_list = [s for s in sentence_list if len(s) <= max_chars] or ["Short. "]
    text = "".join(sentence_list)
    expected, start, end = [], 0, 0
    for sentence in sentence_list:
        if end + len(sentence) - start > max_chars:
            expected.append((start, end))
            start = end
        end += len(sentence)
    expected.append((start, end))
    assert split_text(text, max_chars) == expected


def test_a_long_sentence_is_split_at_words_and_its_tail_shares_a_chunk_with_the_next():
    long_sentence = " ".join(f"word{i}" for i in range(100)) + ". "
    text = long_sentence + "Next one. And another. "
    spans = split_text(text, 300)
    assert_covers(text, spans, 300)
    assert all(text[e - 1] == " " and not text[e].isspace() for _, e in spans[:-1])
    assert len(spans) == 3  # 714 characters: two full chunks of words, then the tail with the next sentences
    assert len(long_sentence) not in {e for _, e in spans}, "the sentence's tail must not be a chunk of its own"


def test_a_thousand_character_word_is_cut_hard_and_its_tail_joins_the_next_words():
    text = "x" * 1000 + " and then some words."
    assert split_text(text, 300) == [(0, 300), (300, 600), (600, 900), (900, len(text))]


@pytest.mark.parametrize("length, expected", [(300, [(0, 300)]), (301, [(0, 300), (300, 301)]), (0, [])])
def test_texts_of_300_and_301_characters(length, expected):
    text = "abcdefghij" * 31
    assert split_text(text[:length], 300) == expected


def test_trailing_whitespace_stays_with_its_sentence_and_chunks_start_with_text():
    text = "".join(f"Sentence {i} is here.   \n " for i in range(60))
    spans = split_text(text, 100)
    assert_covers(text, spans, 100)
    assert all(text[s].startswith("S") and text[e - 1] == " " for s, e in spans)


def test_chinese_sentences_need_no_space_after_the_full_stop():
    sentence = "人工智能生成的文本越来越难以区分。"
    text = sentence * 40
    spans = split_text(text, 300)
    assert_covers(text, spans, 300)
    assert all(e % len(sentence) == 0 for _, e in spans)


def prose(chars, seed=0):
    rng = random.Random(seed)
    words = "the model scores each chunk of text and the server batches chunks from many clients".split()
    out = []
    while sum(map(len, out)) < chars:
        out.append(" ".join(rng.choices(words, k=rng.randint(4, 30))).capitalize() + rng.choice([". ", "? ", "!\n"]))
    return "".join(out)[:chars]


@pytest.mark.parametrize(
    "text",
    [prose(50_000), "a" * 50_000, ("人工智能。" + "안녕하세요 " + "👩\u200d💻") * 4_000, "a" + "\u0301" * 49_999],
    ids=["prose", "one-word", "cjk-emoji", "combining-run"],
)
def test_fifty_thousand_characters_split_in_well_under_100_ms_of_cpu(text):
    """Linear, not quadratic: 6-12 ms of the thread's own CPU time here, seconds if a scan restarted per chunk. CPU
    time, not wall time, so that a busy machine (which made wall time 60-80 ms) cannot fail it."""
    text = text[:50_000]
    best = min(split_cpu_seconds(text) for _ in range(3))
    assert best < 0.1, f"{best * 1000:.1f} ms"
    assert_covers(text, split_text(text, 300), 300)


def split_cpu_seconds(text):
    start = time.thread_time()
    split_text(text, 300)
    return time.thread_time() - start


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(min_value=4, max_value=300))
def test_token_limit_splits_further_without_losing_text(text, max_tokens):
    spans = split_to_token_limit(text, split_text(text, 300), utf8_bytes, max_tokens)
    assert_covers(text, spans, 300)
    assert all(utf8_bytes(text[s:e]) <= max_tokens for s, e in spans)


@settings(max_examples=200, deadline=None)
@given(pieces, st.integers(min_value=max(map(utf8_bytes, CLUSTERS)), max_value=300))
def test_token_limit_splits_do_not_fall_inside_a_cluster(parts, max_tokens):
    text = "".join(parts)
    spans = split_to_token_limit(text, split_text(text, 300), utf8_bytes, max_tokens)
    assert all(utf8_bytes(text[s:e]) <= max_tokens for s, e in spans)
    assert not {e for _, e in spans[:-1]} & inside_clusters(parts)


def test_spans_within_the_token_limit_are_left_alone():
    text = prose(2_000)
    spans = split_text(text, 300)
    assert split_to_token_limit(text, spans, utf8_bytes, 10_000) == spans


@pytest.fixture(scope="module")
def count_roberta_tokens():
    """A byte-level BPE trained here on English only, counting <s> and </s> like RoBERTa."""
    tokenizer = ByteLevelBPETokenizer()
    special = ["<s>", "<pad>", "</s>", "<unk>"]
    tokenizer.train_from_iterator([prose(20_000, seed=1)], vocab_size=600, special_tokens=special, show_progress=False)
    tokenizer.post_processor = RobertaProcessing(("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>")))
    return lambda s: len(tokenizer.encode(s).ids)


def test_300_chinese_characters_exceed_512_tokens_and_are_halved(count_roberta_tokens):
    text = ("人工智能生成的文本越来越难以与人类写作区分" * 15)[:300]
    spans = split_text(text, 300)
    assert spans == [(0, 300)] and count_roberta_tokens(text) > 512
    refined = split_to_token_limit(text, spans, count_roberta_tokens, 512)
    assert refined == [(0, 150), (150, 300)]
    assert all(count_roberta_tokens(text[s:e]) <= 512 for s, e in refined)


def test_mixed_korean_and_emoji_split_at_word_boundaries_under_a_real_bpe(count_roberta_tokens):
    text = " ".join(["안녕하세요", "👩\u200d👩\u200d👧\u200d👦", "감사합니다", "🏳\ufe0f\u200d🌈"] * 20)
    spans = split_to_token_limit(text, split_text(text, 300), count_roberta_tokens, 128)
    assert_covers(text, spans, 300)
    assert len(spans) > 1 and all(count_roberta_tokens(text[s:e]) <= 128 for s, e in spans)
    assert all(text[e - 1] == " " for _, e in spans[:-1])


def test_a_single_character_over_the_limit_is_a_clear_error():
    with pytest.raises(ValueError, match="'😀' at offset 1 alone takes more than 2 tokens"):
        split_to_token_limit("a😀", [(0, 2)], utf8_bytes, 2)
