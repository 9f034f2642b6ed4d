"""Text encoders a user brings as Hugging Face checkpoints (`kit add NAME --task feature-extraction --from DIR`, nothing
else; tests.served.conftest.TEXT_ENCODERS): a BERT saved with sentence-transformers' files and an MPNet without, served
on the real server beside the shipped models. Their embeddings equal PyTorch's on the same chunks, pooled and
normalised as sentence-transformers would (computed here from the encoder's hidden states, not by the kit's module),
texts of a batched door request equal the same texts sent alone, concurrent texts share the encoder's executions, bad
input fails alone, and the door serves each on its route with its dimensions in the OpenAPI document."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from clients.text import TextEmbeddingClient
from kit.control.configs import REPO_ROOT
from kit.control.exports import export_python
from samples.texts import MULTILINGUAL, sample_texts
from tests.served.conftest import TEXT_ENCODERS
from tests.served.doors import answer_schema, answers_as_alone, assert_problem, call, client_on
from tests.served.text_specs import ask, assert_empty_text_fails_alone, assert_texts_share_executions

OUTPUTS = ("EMBEDDING", "CHUNK_EMBEDDINGS", "CHUNK_SPANS")
ATOL = 1e-4  # served (the fused graph, chunks padded to length buckets, batched) against PyTorch on each chunk alone
BATCHING_ATOL = 1e-6  # a text sent alone against the same text in a batched request
DIMENSIONS = 32  # tests.checkpoints' hidden size
TEXTS = [
    "The committee will meet on Thursday.",
    " ".join(sample_texts(count=3, min_chars=300, max_chars=700, seed=12)),  # several chunks under either model
    MULTILINGUAL[1],
    "Yes.",
]


def pytorch(name: str, checkpoints, max_chars: int) -> list[dict]:
    """Each text through the encoder in PyTorch (tests.checkpoints embed, in the export venv): every chunk alone."""
    checkpoint, _, pooling, normalize = TEXT_ENCODERS[name]
    command = [export_python(), "-m", "tests.checkpoints", "embed", "--model", str(checkpoints / checkpoint)]
    command += ["--max-chars", str(max_chars), "--pooling", pooling] + (["--normalize"] if normalize else [])
    done = subprocess.run(command, cwd=REPO_ROOT, input=json.dumps(TEXTS), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def embed(url: str, model: str, text: str) -> dict[str, np.ndarray]:
    return ask(url, model, text, OUTPUTS)


@pytest.fixture(scope="module")
def references(brought_models, checkpoints) -> dict[str, list[dict]]:
    return {name: pytorch(name, checkpoints, brought_models[name].max_chars) for name in TEXT_ENCODERS}


@pytest.mark.parametrize("model", sorted(TEXT_ENCODERS))
def test_served_embeddings_equal_pytorch_pooled_as_sentence_transformers_does(model, server, references):
    assert any(len(answer["spans"]) > 1 for answer in references[model]), "no text of the check took several chunks"
    normalize = TEXT_ENCODERS[model][3]
    for text, want in zip(TEXTS, references[model]):
        got = embed(server.options.grpc_url, model, text)
        assert got["EMBEDDING"].shape == (DIMENSIONS,)
        np.testing.assert_array_equal(got["CHUNK_SPANS"], np.array(want["spans"]).reshape(-1, 2))
        np.testing.assert_allclose(got["CHUNK_EMBEDDINGS"], want["chunks"], atol=ATOL, err_msg=f"{model}: {text[:40]}")
        np.testing.assert_allclose(got["EMBEDDING"], want["embedding"], atol=ATOL, err_msg=f"{model}: {text[:40]}")
        assert (abs(np.linalg.norm(got["EMBEDDING"]) - 1) < 1e-5) == normalize


def as_alone(references, model: str):
    """Each answer's EMBEDDING equals its text's reference, as the text sent alone."""

    def check(i, answer):
        np.testing.assert_allclose(answer["EMBEDDING"], references[model][i]["embedding"], atol=ATOL)

    return check


@pytest.mark.parametrize("model", sorted(TEXT_ENCODERS))
def test_concurrent_texts_share_executions(model, grpc_client, server, references):
    assert_texts_share_executions(grpc_client, server.options.grpc_url, model, TEXTS, OUTPUTS, as_alone(references, model))


@pytest.mark.parametrize("model", sorted(TEXT_ENCODERS))
def test_an_empty_text_fails_alone_among_good_ones(model, server, references):
    assert_empty_text_fails_alone(server.options.grpc_url, model, TEXTS, OUTPUTS, as_alone(references, model))


def assert_alike_but_float_noise(alone: dict, together: dict) -> None:
    """Batched with others, a chunk may be padded to a longer bucket and summed in another order: float noise only."""
    assert [[c["start"], c["end"]] for c in alone["chunks"]] == [[c["start"], c["end"]] for c in together["chunks"]]
    np.testing.assert_allclose(alone["embedding"], together["embedding"], atol=BATCHING_ATOL, rtol=0)


@pytest.mark.parametrize("model", sorted(TEXT_ENCODERS))
def test_the_door_serves_a_text_encoder_and_documents_its_dimensions(model, door, brought_models, references):
    route = brought_models[model].door_route
    for answer, want in zip(answers_as_alone(door, route, TEXTS, assert_alike_but_float_noise), references[model]):
        np.testing.assert_allclose(answer["embedding"], want["embedding"], atol=ATOL)
        assert [[c["start"], c["end"]] for c in answer["chunks"]] == want["spans"]
        np.testing.assert_allclose([c["embedding"] for c in answer["chunks"]], want["chunks"], atol=ATOL)
    schema, _ = answer_schema(door, route)
    embedding = schema["properties"]["embedding"]
    assert (embedding["minItems"], embedding["maxItems"]) == (DIMENSIONS, DIMENSIONS), embedding


@pytest.mark.parametrize("model", sorted(TEXT_ENCODERS))
def test_the_door_refuses_an_empty_text_with_a_clear_4xx(model, door, brought_models):
    answer = call(door, "POST", brought_models[model].door_route, json={"texts": ["A good text.", " "]})
    body = assert_problem(answer, 422, "invalid-request")
    assert "texts" in body["detail"], body


@pytest.mark.parametrize("protocol", ["grpc", "http", "door"])
def test_the_embedding_client_answers_on_every_transport(protocol, server, door, references):
    with client_on(protocol, server, door, TextEmbeddingClient, "sentences") as client:
        results = client.embed_many(TEXTS)
    for result, want in zip(results, references["sentences"]):
        np.testing.assert_allclose(result.embedding, want["embedding"], atol=ATOL)
        assert [[start, end] for start, end, _ in result.chunks] == want["spans"]
        np.testing.assert_allclose([row for _, _, row in result.chunks], want["chunks"], atol=ATOL)
