"""The door speaks the APIs clients already use (docs/DOOR.md#openai-and-tei-clients): OpenAI's official Python client,
pointed at the door by its base URL and key, gets the embeddings of the session's text encoders equal to their own
route's (and to PyTorch's within the export's tolerance), for a string and a list, as floats and as base64, with usage
in the model's tokens; a bad request gets OpenAI's error shape; under overload its own retry honours the door's 429 and
Retry-After. TEI-shaped requests get TEI's answers, equal to the models' own routes (a classifier's raw scores its
entry's logits, a text's tokens its tokenizer's), and TEI's error shape."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import openai
import pytest
from tokenizers import Tokenizer

from tests.served.conftest import TEXT_ENCODERS
from tests.served.doors import call, running_door
from tests.served.gate import WAIT_S, Gate
from tests.served.reliability import own_server, wait_for
from tests.served.test_embedding_models import ATOL, BATCHING_ATOL, TEXTS, pytorch
from tests.served.text_specs import ask

KEY = "compat-key"
ENCODER, CLASSIFIER = "sentences", "topics"


@pytest.fixture(scope="module")
def encoder_door(server, tmp_path_factory):
    """A door with keys whose TEI routes serve the encoder."""
    log = tmp_path_factory.mktemp("compat") / "door.log"
    with running_door(server.options.grpc_url, log, "--tei", ENCODER, env={"DOOR_API_KEYS": KEY}) as door:
        yield door


@pytest.fixture(scope="module")
def client(encoder_door):
    with openai.OpenAI(base_url=f"{encoder_door.url}/v1", api_key=KEY, max_retries=0) as openai_client:
        yield openai_client


@pytest.fixture(scope="module")
def references(checkpoints, brought_models) -> list[dict]:
    return pytorch(ENCODER, checkpoints, brought_models[ENCODER].max_chars)


def own_route(door, model: str, texts: list[str]) -> list[dict]:
    answer = call(door, "POST", f"/v1/{model}", json={"texts": texts}, headers={"X-API-Key": KEY})
    assert answer.status == 200, answer.data[:300]
    return answer.json()


@pytest.mark.parametrize("encoding_format", ["float", "base64", None])  # None: the client's default (base64)
def test_openais_client_gets_the_encoders_embeddings_for_a_list_and_a_string(
    client, encoder_door, references, checkpoints, encoding_format
):
    extra = {"encoding_format": encoding_format} if encoding_format else {}
    answer = client.embeddings.create(model=ENCODER, input=TEXTS, **extra)
    own = own_route(encoder_door, ENCODER, TEXTS)
    assert answer.model == ENCODER and [item.index for item in answer.data] == list(range(len(TEXTS)))
    for item, mine, want in zip(answer.data, own, references):
        np.testing.assert_allclose(vector(item, encoding_format), mine["embedding"], atol=BATCHING_ATOL, rtol=0)
        np.testing.assert_allclose(vector(item, encoding_format), want["embedding"], atol=ATOL)
    tokenizer = Tokenizer.from_file(str(checkpoints / TEXT_ENCODERS[ENCODER][0] / "tokenizer.json"))
    tokens = sum(
        len(tokenizer.encode(text[start:end]).ids) for text, want in zip(TEXTS, references) for start, end in want["spans"]
    )
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == tokens
    one = client.embeddings.create(model=ENCODER, input=TEXTS[1], **extra)
    assert len(one.data) == 1
    np.testing.assert_allclose(vector(one.data[0], encoding_format), references[1]["embedding"], atol=ATOL)


def vector(item, encoding_format: str | None) -> np.ndarray:
    """The client decodes base64 itself where it chose it (its default); asked for base64, it hands over the text."""
    if encoding_format == "base64":
        return np.frombuffer(base64.b64decode(item.embedding), dtype="<f4")
    return np.asarray(item.embedding)


def test_a_bad_request_gets_openais_error_shape(client):
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.embeddings.create(model="no-such-model", input="A text.")
    assert caught.value.type == "invalid_request_error" and caught.value.param == "model", caught.value.body
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.embeddings.create(model=ENCODER, input=["A text.", "   "])
    assert caught.value.param.startswith("input"), caught.value.body
    with pytest.raises(openai.AuthenticationError) as caught:
        openai.OpenAI(base_url=client.base_url, api_key="wrong", max_retries=0).models.list()
    assert caught.value.type == "authentication_error"


def test_openais_client_lists_the_served_models(client, brought_models):
    listed = {model.id for model in client.models.list()}
    assert "radar" in listed and set(brought_models) <= listed


def test_tei_embed_and_info_answer_as_tei_with_the_encoders_own_embeddings(encoder_door, references):
    headers = {"Authorization": f"Bearer {KEY}"}
    answer = call(encoder_door, "POST", "/embed", json={"inputs": TEXTS, "truncate": True}, headers=headers)
    assert answer.status == 200, answer.data[:300]
    vectors = answer.json()
    own = own_route(encoder_door, ENCODER, TEXTS)
    assert len(vectors) == len(TEXTS)
    for vector, mine in zip(vectors, own):  # the encoder normalises: TEI's normalize changes nothing
        np.testing.assert_allclose(vector, mine["embedding"], atol=BATCHING_ATOL, rtol=0)
    single = call(encoder_door, "POST", "/embed", json={"inputs": TEXTS[0]}, headers=headers).json()
    np.testing.assert_allclose(single, [references[0]["embedding"]], atol=ATOL)
    info = call(encoder_door, "GET", "/info", headers=headers).json()
    assert info["model_id"] == ENCODER and info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert info["max_input_length"] == 128  # tests.checkpoints' token limit
    refused = call(encoder_door, "POST", "/embed", json={"inputs": []}, headers=headers)
    assert refused.status == 422 and refused.headers["content-type"] == "application/json"
    assert set(refused.json()) == {"error", "error_type"} and refused.json()["error_type"] == "Validation"


def test_tei_predict_answers_the_classifiers_own_scores_best_first(server, tmp_path):
    with running_door(server.options.grpc_url, tmp_path / "door.log", "--tei", CLASSIFIER) as door:
        texts = [TEXTS[0], TEXTS[1]]
        batch = call(door, "POST", "/predict", json={"inputs": [[text] for text in texts]})
        assert batch.status == 200, batch.data[:300]
        own = call(door, "POST", f"/v1/{CLASSIFIER}", json={"texts": texts}).json()
        for predictions, mine in zip(batch.json(), own):
            assert [p["score"] for p in predictions] == sorted((p["score"] for p in predictions), reverse=True)
            assert {p["label"]: p["score"] for p in predictions} == pytest.approx(mine["scores"], abs=BATCHING_ATOL)
        single = call(door, "POST", "/predict", json={"inputs": texts[0]}).json()
        assert {p["label"]: p["score"] for p in single} == pytest.approx(own[0]["scores"], abs=BATCHING_ATOL)
        info = call(door, "GET", "/info").json()
        assert info["model_type"]["classifier"]["id2label"] == {"0": "sport", "1": "politics", "2": "science"}
        assert call(door, "POST", "/embed", json={"inputs": "a"}).status == 404
        for text, mine in zip(texts, own):
            raw = call(door, "POST", "/predict", json={"inputs": text, "raw_scores": True}).json()
            logits = ask(server.options.grpc_url, CLASSIFIER, text, ("LOGITS", "SCORES", "CHUNK_SPANS"))
            assert [p["score"] for p in raw] == sorted((p["score"] for p in raw), reverse=True)
            assert {p["label"]: p["score"] for p in raw} == pytest.approx(
                dict(zip(("sport", "politics", "science"), logits["LOGITS"].tolist())), abs=BATCHING_ATOL
            )
            if len(logits["CHUNK_SPANS"]) == 1:  # a text of one chunk: its logits are the model's, its scores their softmax
                probabilities = np.exp(logits["LOGITS"]) / np.exp(logits["LOGITS"]).sum()
                assert dict(zip(("sport", "politics", "science"), probabilities)) == pytest.approx(mine["scores"], abs=1e-5)


def test_tei_tokenize_answers_the_models_own_tokens_with_offsets_in_utf8_bytes(encoder_door, server, checkpoints):
    """/tokenize by the encoder's tokenizer: its ids, its special tokens as TEI names them (no offsets), the text of
    every other token the bytes it covers, and as many tokens with special ones as the entry counts for a text of one
    chunk (TOKENS)."""
    headers = {"Authorization": f"Bearer {KEY}"}
    tokenizer = Tokenizer.from_file(str(checkpoints / TEXT_ENCODERS[ENCODER][0] / "tokenizer.json"))
    texts = [TEXTS[0], TEXTS[2], TEXTS[3]]  # one chunk each; one Korean
    answer = call(encoder_door, "POST", "/tokenize", json={"inputs": texts}, headers=headers)
    assert answer.status == 200, answer.data[:300]
    for text, tokens in zip(texts, answer.json()):
        assert [token["id"] for token in tokens] == tokenizer.encode(text).ids
        assert [token["text"] for token in tokens if token["special"]] == ["[CLS]", "[SEP]"]
        assert all(token["start"] is None and token["stop"] is None for token in tokens if token["special"])
        raw = text.encode("utf-8")
        assert all(raw[t["start"] : t["stop"]].decode("utf-8") == t["text"] for t in tokens if not t["special"])
        counted = ask(server.options.grpc_url, ENCODER, text, ("TOKENS", "CHUNK_SPANS"))
        assert len(counted["CHUNK_SPANS"]) == 1 and counted["TOKENS"][0] == len(tokens)
    plain = call(encoder_door, "POST", "/tokenize", json={"inputs": texts[0], "add_special_tokens": False}, headers=headers)
    assert [token["id"] for token in plain.json()[0]] == tokenizer.encode(texts[0], add_special_tokens=False).ids
    refused = call(encoder_door, "POST", "/tokenize", json={"inputs": "  "}, headers=headers)
    assert refused.status == 422 and refused.json()["error_type"] == "Validation"


def test_openais_own_retry_honours_the_doors_429_and_every_answer_is_right(brought_models, references, tmp_path):
    """The encoder reaches its texts model through a closed gate with a queue of 2 (tests.served.gate): once it holds
    3 requests, OpenAI's client, retrying by itself, is refused with 429 and Retry-After by construction, not by a race;
    the gate opens once the door has refused it, and every embedding comes back right."""
    root, gate = tmp_path / "gated", Gate(f"{ENCODER}_texts", queue=2)
    specs = {ENCODER: brought_models[ENCODER]}
    with (
        own_server(root, {ENCODER: gate.as_step}, specs=specs, gates=[gate]) as server,
        running_door(server.options.grpc_url, root / "door.log") as door,
        openai.OpenAI(base_url=f"{door.url}/v1", api_key="none", max_retries=30) as retrying,
        ThreadPoolExecutor(gate.queue + 1 + len(TEXTS)) as pool,
    ):
        with gate.closed():
            body = {"model": ENCODER, "input": TEXTS[0]}
            held = gate.fill(server, pool, lambda: call(door, "POST", "/v1/embeddings", json=body))
            answers = [pool.submit(retrying.embeddings.create, model=ENCODER, input=text) for text in TEXTS]
            refusals = lambda: door.log.read_text().count('/v1/embeddings" 429')  # noqa: E731
            assert wait_for(lambda: refusals() > 0, WAIT_S), "the full queue refused nothing"
        for response in (future.result() for future in held):
            assert response.status == 200, response.data[:300]
            np.testing.assert_allclose(response.json()["data"][0]["embedding"], references[0]["embedding"], atol=ATOL)
        for i, answer in enumerate(future.result() for future in answers):
            np.testing.assert_allclose(answer.data[0].embedding, references[i]["embedding"], atol=ATOL)
