"""Query-document pairs for a cross-encoder, without Triton (kit.pipelines.text.pairs), on the exported RADAR
tokenizer: every chunk fits beside its query, pairs planned together answer as planned alone, a document's score is
its chunks' best or mean, and a query that leaves no room fails alone."""

import numpy as np
import pytest
from tokenizers import Tokenizer

from kit.pipelines.errors import InputError
from kit.pipelines.text.pairs import PairPipeline, RankHead, pair_token_lengths, sigmoid
from samples.texts import MULTILINGUAL, sample_texts

LIMIT = 64


@pytest.fixture(scope="module")
def tokenizer(radar_artifacts):
    return Tokenizer.from_file(str(radar_artifacts / "tokenizer.json"))


def pipeline(tokenizer, aggregation="max", max_batch=4):
    return PairPipeline(tokenizer, LIMIT, 1, [24, 40, LIMIT], max_batch=max_batch, head=RankHead(aggregation))


def row_logits(group) -> np.ndarray:
    """A logit that depends on each pair's own tokens only, as a cross-encoder's does."""
    totals = (group.input_ids * group.attention_mask).sum(axis=1) % 31
    return (np.sin(totals) * 3)[:, None].astype(np.float32)


def answered(ranker: PairPipeline, pairs):
    plan = ranker.plan_many(pairs)
    scores = ranker.scores(plan)
    for number, group in enumerate(plan.groups):
        scores.add(number, row_logits(group))
    return plan, [scores.result(p) for p in range(len(pairs))]


def test_every_chunk_fits_beside_its_query_and_the_chunks_cover_the_document(tokenizer):
    query = "When does the committee meet?"
    document = " ".join(sample_texts(3, 300, 600, seed=5)) + "".join(MULTILINGUAL)
    ranker = pipeline(tokenizer)
    plan = ranker.plan_many([(query, document)])
    spans = plan.spans[0]
    assert len(spans) > 1 and spans[0][0] == 0 and spans[-1][1] == len(document)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "chunks cover the document, in order, once"
    rows = {index: (group, row) for group in plan.groups for row, index in enumerate(group.indices)}
    for chunk, (start, end) in enumerate(spans):
        group, row = rows[chunk]
        want = tokenizer.encode(query, document[start:end]).ids
        assert len(want) <= LIMIT and group.input_ids[row, : len(want)].tolist() == want
        assert group.attention_mask[row].sum() == len(want)
    assert plan.tokens == [sum(len(tokenizer.encode(query, document[s:e]).ids) for s, e in spans)]


def test_pairs_planned_together_answer_as_each_planned_alone_in_fewer_requests(tokenizer):
    ranker = pipeline(tokenizer)
    pairs = [("bread", text) for text in sample_texts(5, 50, 500, seed=8)] + [("What is it?", "Short one.")]
    together, results = answered(ranker, pairs)
    alone_requests = 0
    for pair, result in zip(pairs, results):
        plan, (alone,) = answered(ranker, [pair])
        alone_requests += len(plan.groups)
        assert result.spans.tolist() == alone.spans.tolist() and result.tokens == alone.tokens
        np.testing.assert_allclose(result.chunk_scores, alone.chunk_scores, atol=1e-7)
        assert result.score == pytest.approx(alone.score, abs=1e-7)
    assert len(together.groups) < alone_requests


@pytest.mark.parametrize("aggregation", ["max", "mean"])
def test_a_documents_score_is_its_chunks_best_or_their_length_weighted_mean(tokenizer, aggregation):
    document = " ".join(sample_texts(2, 400, 500, seed=6))
    (result,) = answered(pipeline(tokenizer, aggregation), [("bread", document)])[1]
    chunks, lengths = result.chunk_scores, np.diff(result.spans, axis=1).ravel()
    assert len(chunks) > 1 and np.all((chunks > 0) & (chunks < 1))
    want = chunks.max() if aggregation == "max" else (chunks * lengths).sum() / lengths.sum()
    assert result.score == pytest.approx(float(want), abs=1e-6)
    assert sigmoid(np.array([0.0]))[0] == 0.5


def test_a_query_that_leaves_no_room_for_a_document_is_refused(tokenizer):
    with pytest.raises(InputError, match="QUERY takes"):
        pipeline(tokenizer).room("word " * LIMIT)
    with pytest.raises(ValueError, match="aggregation"):
        RankHead("median")


def test_the_bucket_sample_counts_the_pairs_as_served(tokenizer):
    pairs = [("bread", text) for text in sample_texts(3, 200, 400, seed=2)]
    lengths = pair_token_lengths(tokenizer, pairs, 0, LIMIT)
    plan = PairPipeline(tokenizer, LIMIT, 1, [LIMIT]).plan_many(pairs)
    assert sorted(lengths) == sorted(int(m.sum()) for g in plan.groups for m in g.attention_mask) and max(lengths) <= LIMIT
