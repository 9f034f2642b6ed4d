"""RADAR served end to end by a real tritonserver, checked against direct inference of the same model."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from clients.radar import RadarClient
from samples.texts import MULTILINGUAL, sample_texts
from tests.conftest import EXPORT_PYTHON, REPO_ROOT


@pytest.fixture
def client(url, protocol):
    client = RadarClient(url, protocol, concurrency=32)
    yield client
    client.close()


def assert_spans_cover(text, spans, max_chars=300):
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(0 < end - start <= max_chars for start, end in spans)


def assert_matches_reference(text, result, reference):
    assert_spans_cover(text, result.chunk_spans)
    expected = [reference(text[s:e]) for s, e in result.chunk_spans]
    np.testing.assert_allclose(result.chunk_scores, expected, atol=1e-4, rtol=0)
    lengths = np.array([e - s for s, e in result.chunk_spans], dtype=np.float64)
    assert result.score == pytest.approx(float(np.dot(expected, lengths) / lengths.sum()), abs=1e-4)


def test_chunk_scores_equal_direct_onnx_inference(client, reference):
    for text in sample_texts(6, 100, 800, seed=7):
        assert_matches_reference(text, client.classify(text), reference)


def test_fifty_thousand_character_text_is_scored_chunk_by_chunk(client, reference):
    text = " ".join(sample_texts(80, 600, 700, seed=3))[:50_000]
    result = client.classify(text)
    assert len(result.chunk_scores) >= 50_000 // 300
    assert_spans_cover(text, result.chunk_spans)
    sample = list(range(0, len(result.chunk_spans), 17))
    expected = [reference(text[slice(*result.chunk_spans[i])]) for i in sample]
    np.testing.assert_allclose(np.array(result.chunk_scores)[sample], expected, atol=1e-4, rtol=0)


def test_cjk_and_emoji_chunks_are_split_to_fit_the_token_limit(client, reference):
    text = "".join(MULTILINGUAL[:2]) * 20 + "🤖👩‍💻" * 300
    result = client.classify(text)
    token_counts = [len(reference.tokenizer.encode(text[s:e]).ids) for s, e in result.chunk_spans]
    assert max(token_counts) <= reference.max_tokens
    assert_matches_reference(text, result, reference)


def test_texts_of_300_and_301_characters(client, reference):
    base = sample_texts(1, 400, 400, seed=11)[0]
    one = client.classify(base[:300])
    two = client.classify(base[:301])
    assert one.chunk_spans == [(0, 300)]
    assert len(two.chunk_spans) == 2
    assert_matches_reference(base[:301], two, reference)


def test_concurrent_requests_are_answered_right_and_batched(client, reference, grpc_client):
    texts = sample_texts(32, 100, 800, seed=5)
    before, texts_before = batch_counts(grpc_client), counts(grpc_client, "radar_texts")
    results = client.classify_many(texts)
    for text, result in zip(texts, results):
        assert not isinstance(result, Exception), result
        assert_matches_reference(text, result, reference)
    after, texts_after = batch_counts(grpc_client), counts(grpc_client, "radar_texts")
    merged = {size: after.get(size, 0) - before.get(size, 0) for size in after if size > 1}
    assert sum(merged.values()) > 0, f"no classifier batch larger than 1 formed: {after}"
    # radar_texts took the texts several at a time: the texts in flight are not one per entry instance
    requests, executions = (a - b for a, b in zip(texts_after, texts_before))
    assert requests == len(texts) and executions < requests


def test_one_chunk_texts_share_classifier_requests(client, reference, grpc_client):
    """Texts that are one chunk each reach the classifier in shared requests, not one request per text."""
    texts = sample_texts(48, 200, 290, seed=13)
    before = counts(grpc_client, "radar_classifier")
    results = client.classify_many(texts)
    for text, result in zip(texts, results):
        assert not isinstance(result, Exception), result
        assert result.chunk_spans == [(0, len(text))]
        assert_matches_reference(text, result, reference)
    requests, _ = (a - b for a, b in zip(counts(grpc_client, "radar_classifier"), before))
    assert requests < len(texts)


def counts(grpc_client, model: str) -> tuple[int, int]:
    """`model`'s requests and executions so far."""
    stats = grpc_client.get_inference_statistics(model, as_json=True)["model_stats"][0]
    return int(stats["inference_stats"]["success"].get("count", 0)), int(stats.get("execution_count", 0))


def batch_counts(grpc_client) -> dict[int, int]:
    stats = grpc_client.get_inference_statistics("radar_classifier", as_json=True)
    return {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["model_stats"][0].get("batch_stats", [])}


def test_served_scores_equal_pytorch_within_export_tolerance(server, reference, tmp_path):
    """PyTorch lives in the export venv: score the served chunks there and compare."""
    if not EXPORT_PYTHON.is_file():
        pytest.fail(f"{EXPORT_PYTHON} is missing: run `make test` (it creates the export venv)")
    client = RadarClient(server.options.grpc_url, "grpc")
    texts = sample_texts(3, 200, 700, seed=13)
    chunks = []
    for text in texts:
        result = client.classify(text)
        chunks += [(text[s:e], score) for (s, e), score in zip(result.chunk_spans, result.chunk_scores)]
    client.close()
    meta = json.loads((REPO_ROOT / "artifacts" / "radar" / "export.json").read_text())
    completed = subprocess.run(
        [str(EXPORT_PYTHON), "-m", "export.score", "--model", meta["source"], "--ai-label-index", str(meta["ai_label_index"])],
        input=json.dumps([c for c, _ in chunks]),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=True,
    )
    torch_scores = json.loads(completed.stdout)
    np.testing.assert_allclose([s for _, s in chunks], torch_scores, atol=max(reference.atol, 1e-4), rtol=0)


def test_cli_prints_scores_for_many_files(server, protocol, url, tmp_path):
    files = []
    for i, text in enumerate(sample_texts(3, 300, 700, seed=17)):
        path = tmp_path / f"text{i}.txt"
        path.write_text(text)
        files.append(str(path))
    completed = subprocess.run(
        [sys.executable, "-m", "clients.radar", "--url", url, "--protocol", protocol, "--json", *files],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert completed.returncode == 0, completed.stderr
    lines = [json.loads(line) for line in completed.stdout.splitlines()]
    assert [line["file"] for line in lines] == files
    for line, path in zip(lines, files):
        text = open(path).read()
        assert 0.0 <= line["score"] <= 1.0
        assert line["chunks"][-1]["end"] == len(text)
