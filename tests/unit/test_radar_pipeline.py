"""RADAR pre- and post-processing without Triton, on the exported tokenizer."""

import numpy as np
import pytest

from kit.adapters.artifacts import radar_pipeline
from kit.adapters.settings import RadarSettings
from kit.pipelines.text.radar import InputError, decode_text
from samples.texts import MULTILINGUAL, sample_texts


def pipeline_with(folder, buckets, max_batch=32):
    settings = RadarSettings("radar_classifier", 300, 1 << 20, len(buckets), tuple(buckets), max_batch)
    return radar_pipeline(folder, settings)


@pytest.fixture(scope="module")
def pipeline(radar_artifacts):
    return pipeline_with(radar_artifacts, [64, 128, 256, 512], max_batch=4)


def test_plan_puts_every_chunk_in_exactly_one_bucket_group(pipeline):
    text = " ".join(sample_texts(10, 500, 800, seed=2)) + "".join(MULTILINGUAL) * 5
    plan = pipeline.plan(text)
    indices = sorted(i for group in plan.groups for i in group.indices)
    assert indices == list(range(len(plan.spans)))
    for group in plan.groups:
        assert len(group.indices) <= 4
        assert group.input_ids.shape == group.attention_mask.shape
        assert group.input_ids.shape[1] in pipeline.buckets
        for row, i in enumerate(group.indices):
            ids = pipeline.tokenizer.encode(text[slice(*plan.spans[i])]).ids
            assert group.input_ids[row, : len(ids)].tolist() == ids
            assert group.attention_mask[row].sum() == len(ids)
            assert (group.input_ids[row, len(ids) :] == pipeline.pad_id).all()


def test_finish_weights_chunk_scores_by_their_length(pipeline):
    text = sample_texts(1, 700, 700, seed=4)[0]
    plan = pipeline.plan(text)
    rng = np.random.default_rng(0)
    logits = [rng.normal(size=(len(g.indices), 2)).astype(np.float32) for g in plan.groups]
    result = pipeline.finish(plan, logits)
    expected = np.zeros(len(plan.spans))
    for group, values in zip(plan.groups, logits):
        expected[group.indices] = np.exp(values[:, 0]) / np.exp(values).sum(axis=1)
    np.testing.assert_allclose(result.chunk_scores, expected, atol=1e-6)
    lengths = np.diff(np.asarray(plan.spans), axis=1).ravel()
    assert result.score == pytest.approx((expected * lengths).sum() / lengths.sum(), abs=1e-6)
    assert result.spans.shape == (len(plan.spans), 2)


@pytest.mark.parametrize(
    "raw, message",
    [(b"", "empty"), (b"   \n", "whitespace"), (b"\xc3\x28", "UTF-8"), (b"x" * 101, "maximum is 100 bytes")],
)
def test_decode_text_rejects_bad_input_with_a_clear_message(raw, message):
    with pytest.raises(InputError, match=message):
        decode_text(raw, max_bytes=100)


def test_largest_bucket_must_match_the_token_limit(radar_artifacts):
    with pytest.raises(ValueError, match="largest bucket"):
        pipeline_with(radar_artifacts, [64, 128])
