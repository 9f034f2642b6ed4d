"""RADAR pre- and post-processing without Triton, on the exported tokenizer."""

import numpy as np
import pytest

from kit.adapters.artifacts import text_pipeline
from kit.adapters.settings import TextSettings
from kit.pipelines.text.pipeline import InputError, decode_request_texts, decode_text
from samples.texts import MULTILINGUAL, sample_texts


def pipeline_with(folder, buckets, max_batch=32):
    settings = TextSettings("radar_classifier", 300, 1 << 20, len(buckets), tuple(buckets), max_batch)
    return text_pipeline(folder, settings)


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
    raw = np.zeros((len(plan.spans), 2))
    for group, values in zip(plan.groups, logits):
        raw[group.indices] = values
    np.testing.assert_allclose(result.logits, lengths @ raw / lengths.sum(), atol=1e-6)  # TEI's raw scores


@pytest.mark.parametrize(
    "raw, message",
    [(b"", "empty"), (b"   \n", "whitespace"), (b"\xc3\x28", "UTF-8"), (b"x" * 101, "maximum is 100 bytes")],
)
def test_decode_text_rejects_bad_input_with_a_clear_message(raw, message):
    with pytest.raises(InputError, match=message):
        decode_text(raw, max_bytes=100)


def test_a_request_of_several_texts_decodes_each_and_names_the_bad_one():
    tensor = np.array([b"one", "deux \u00e9".encode()], dtype=np.object_)
    assert decode_request_texts(tensor, 100, 8) == ["one", "deux \u00e9"]
    assert decode_request_texts(np.array([b"alone"], dtype=np.object_), 100, 8) == ["alone"]
    with pytest.raises(InputError, match="TEXT 1 is not valid UTF-8"):
        decode_request_texts(np.array([b"fine", b"\xc3\x28"], dtype=np.object_), 100, 8)
    with pytest.raises(InputError, match="TEXT is empty"):  # one text's error reads as it always did
        decode_request_texts(np.array([b" "], dtype=np.object_), 100, 8)
    with pytest.raises(InputError, match="holds 3 texts; a request carries 1 to 2"):
        decode_request_texts(np.array([b"a", b"b", b"c"], dtype=np.object_), 100, 2)


def test_largest_bucket_must_match_the_token_limit(radar_artifacts):
    with pytest.raises(ValueError, match="largest bucket"):
        pipeline_with(radar_artifacts, [64, 128])


def row_logits(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Logits that depend on each chunk's own tokens only, as a classifier's should."""
    totals = (ids * mask).sum(axis=1) % 97
    return np.stack([np.sin(totals), np.cos(totals)], axis=1).astype(np.float32)


def test_many_texts_planned_together_answer_as_each_planned_alone_in_fewer_fuller_requests(pipeline):
    texts = sample_texts(6, 100, 800, seed=9) + ["Short one.", "".join(MULTILINGUAL)]
    together = pipeline.plan_many(texts)
    scores = pipeline.scores(together)
    for number, group in enumerate(together.groups):
        scores.add(number, row_logits(group.input_ids, group.attention_mask))
    results = [scores.result(t) for t in range(len(texts))]
    alone_requests = 0
    for text, result in zip(texts, results):
        plan = pipeline.plan(text)
        alone_requests += len(plan.groups)
        expected = pipeline.finish(plan, [row_logits(g.input_ids, g.attention_mask) for g in plan.groups])
        assert result.spans.tolist() == expected.spans.tolist()
        np.testing.assert_allclose(result.chunk_scores, expected.chunk_scores, atol=1e-6)
        assert result.score == pytest.approx(expected.score, abs=1e-6)
        np.testing.assert_allclose(result.logits, expected.logits, atol=1e-6)
        chunk_tokens = [len(pipeline.tokenizer.encode(text[start:end]).ids) for start, end in plan.spans]
        assert result.tokens == expected.tokens == sum(chunk_tokens)  # what an API bills: every chunk's tokens
    assert sorted(i for g in together.groups for i in g.indices) == list(range(len(together.owners)))
    assert all(len(g.indices) <= 4 for g in together.groups)
    assert len(together.groups) < alone_requests  # chunks of different texts share requests
    assert any(len({together.owners[i][0] for i in g.indices}) > 1 for g in together.groups)


def test_a_text_is_ready_when_the_last_group_with_one_of_its_chunks_answers(pipeline):
    texts = ["Short one.", " ".join(sample_texts(4, 600, 800, seed=3))]
    plan = pipeline.plan_many(texts)
    scores = pipeline.scores(plan)
    last = {t: max(n for n, g in enumerate(plan.groups) if any(plan.owners[i][0] == t for i in g.indices)) for t in (0, 1)}
    order = sorted(range(len(plan.groups)), key=lambda n: (n != last[0], n))  # the short text's group first
    ready = [(n, scores.add(n, row_logits(plan.groups[n].input_ids, plan.groups[n].attention_mask))) for n in order]
    assert ready[0] == (last[0], [0] if last[0] != last[1] else [0, 1])
    assert [t for _, done in ready for t in done] == [0, 1]  # each text exactly once
    assert ready[-1][1] == [1] or last[0] == last[1]


def test_planning_no_text_plans_nothing(pipeline):
    plan = pipeline.plan_many([])
    assert plan.groups == [] and pipeline.scores(plan).waiting == []
