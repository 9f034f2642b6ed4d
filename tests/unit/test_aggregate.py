"""Chunk probabilities (a stable softmax column) and the length-weighted text score."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kit.pipelines.text.aggregate import Head, ai_probability, weighted_mean

logit_rows = st.lists(st.tuples(st.floats(-50, 50), st.floats(-50, 50)), min_size=1, max_size=20)


def test_ai_probability_is_a_stable_softmax_column():
    logits = np.array([[0.0, 0.0], [1000.0, 0.0], [2.0, 1.0], [-1000.0, 1000.0]], dtype=np.float32)
    expected = [0.5, 1.0, math.e / (math.e + 1), 0.0]
    result = ai_probability(logits)
    assert result.dtype == np.float32 and result.shape == (4,)
    np.testing.assert_allclose(result, expected, rtol=1e-6)
    np.testing.assert_allclose(ai_probability(logits, ai_label_index=1), 1 - np.array(expected), atol=1e-6)


@given(logit_rows, st.floats(-1e4, 1e4))
def test_ai_probability_matches_the_textbook_formula_and_ignores_a_shift(rows, shift):
    logits = np.array(rows)
    expected = [math.exp(a) / (math.exp(a) + math.exp(b)) for a, b in rows]
    np.testing.assert_allclose(ai_probability(logits), expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ai_probability(logits + shift), expected, rtol=1e-4, atol=1e-6)


def test_a_single_row_of_logits_gives_one_probability():
    assert float(ai_probability(np.array([0.0, math.log(3.0)]))) == pytest.approx(0.25)


def test_a_short_tail_chunk_counts_by_its_length_not_as_a_full_chunk():
    assert weighted_mean([1.0, 0.0], [(0, 300), (300, 320)]) == pytest.approx(300 / 320)


@given(st.lists(st.tuples(st.floats(0, 1), st.integers(1, 300)), min_size=1, max_size=30))
def test_weighted_mean_is_the_character_weighted_average(items):
    scores, spans, start = [], [], 0
    for score, length in items:
        scores.append(score)
        spans.append((start, start + length))
        start += length
    expected = sum(score * length for score, length in items) / start
    assert weighted_mean(scores, spans) == pytest.approx(expected)
    assert min(scores) - 1e-12 <= weighted_mean(scores, spans) <= max(scores) + 1e-12


def test_empty_or_mismatched_input_is_an_error():
    with pytest.raises(ValueError, match="no logits"):
        ai_probability(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="one score per span"):
        weighted_mean([0.5], [])
    with pytest.raises(ValueError, match="one score per span"):
        weighted_mean([], [])


def test_an_embedding_head_keeps_chunk_outputs_and_normalises_the_length_weighted_mean():
    chunks = np.array([[3.0, 4.0], [0.0, 2.0]], dtype=np.float32)
    spans = [(0, 300), (300, 400)]
    head = Head(softmax=False, normalize=True)
    np.testing.assert_array_equal(head.chunks(chunks), chunks)
    mean = (300 * chunks[0] + 100 * chunks[1]) / 400
    np.testing.assert_allclose(head.text(chunks, spans), mean / np.linalg.norm(mean), rtol=1e-6)
    np.testing.assert_allclose(Head(softmax=False).text(chunks, spans), mean, rtol=1e-6)


def test_a_classifier_head_answers_probabilities():
    logits = np.array([[2.0, 0.0], [0.0, 0.0]])
    probabilities = Head().chunks(logits)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    assert probabilities[0, 0] > 0.8 and probabilities[1, 0] == pytest.approx(0.5)
