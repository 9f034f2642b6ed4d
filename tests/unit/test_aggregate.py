"""Chunk probabilities and the length-weighted text score."""

import numpy as np
import pytest

from kit.text.aggregate import ai_probability, weighted_mean


def test_ai_probability_is_a_stable_softmax_column():
    logits = np.array([[0.0, 0.0], [1000.0, 0.0], [2.0, 1.0]], dtype=np.float32)
    expected = [0.5, 1.0, np.e / (np.e + 1)]
    np.testing.assert_allclose(ai_probability(logits, 0), expected, rtol=1e-6)
    np.testing.assert_allclose(ai_probability(logits, 1), 1 - np.array(expected), atol=1e-6)


def test_weighted_mean_weights_by_characters():
    assert weighted_mean([1.0, 0.0], [(0, 300), (300, 320)]) == pytest.approx(300 / 320)


def test_empty_or_mismatched_input_is_an_error():
    with pytest.raises(ValueError):
        ai_probability(np.zeros((0, 2)))
    with pytest.raises(ValueError):
        weighted_mean([0.5], [])
