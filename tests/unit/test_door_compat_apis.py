"""The door's OpenAI and TEI routes without a server: a fake upstream answers an encoder and a classifier made from
radar's built config (their outputs and parameters changed as the text task changes them), so these tests pin the
request schemas, the answer shapes, the error shapes and the keys; tests/served/test_door_compat_apis.py holds the
answers to the models' own, with OpenAI's client."""

from __future__ import annotations

import base64
import dataclasses

import numpy as np
import pytest
from fastapi.testclient import TestClient
from tritonclient.grpc import model_config_pb2 as mc

from door.app import create_app
from door.contract import ContractError, contract_from_configs
from door.problems import Problem
from door.settings import DoorSettings
from door.tei_api import tei_model
from door.upstream import Upstream
from kit.control.configs import copy_config, set_parameter
from tests.profiles import configs

VECTOR = np.array([3.0, 4.0, 0.0], np.float32)
LABELS = ["sport", "politics", "science"]


def text_model(radar: mc.ModelConfig, name: str, answer: str, outputs: dict[str, list[int]], **params) -> mc.ModelConfig:
    config = copy_config(radar)
    config.name = name
    del config.output[:]
    for output, dims in outputs.items():
        config.output.add(
            name=output, data_type=mc.TYPE_INT32 if output in ("CHUNK_SPANS", "TOKENS", "CHUNKS") else mc.TYPE_FP32, dims=dims
        )
    for key, value in {"door_route": f"/v1/{name}", "door_answer": answer, **params}.items():
        set_parameter(config, key, value)
    config.parameters.pop("canary", None)
    config.parameters.pop("canary_from", None)
    return config


@pytest.fixture(scope="module")
def contract(radar_artifacts):
    radar = configs("cpu", specs={})["radar"]
    encoder = text_model(
        radar,
        "encoder",
        "text-embedding",
        {"EMBEDDING": [-1], "CHUNK_EMBEDDINGS": [-1, 3], "CHUNK_SPANS": [-1, 2], "TOKENS": [-1], "CHUNKS": [-1]},
        pooling="mean",
    )
    classifier = text_model(
        radar,
        "topics",
        "text-labels",
        {"SCORES": [-1], "CHUNK_SCORES": [-1, 3], "CHUNK_SPANS": [-1, 2], "CHUNKS": [-1], "LOGITS": [-1]},
        labels='["sport", "politics", "science"]',
    )
    return contract_from_configs({"encoder": encoder, "topics": classifier})


class FakeUpstream(Upstream):
    """The encoder answers VECTOR and 7 tokens a text; the classifier [0.2, 0.5, 0.3]."""

    fail: Problem | None = None

    async def open(self):
        self.sent = []

    async def close(self):
        pass

    async def infer(self, model, arrays, request_id=""):
        self.sent.append((model, arrays["TEXT"].tolist()))
        if self.fail is not None:
            raise self.fail
        spans = np.array([[0, 1]], np.int32)
        if model == "encoder":
            return {
                "EMBEDDING": VECTOR,
                "CHUNK_EMBEDDINGS": VECTOR[None],
                "CHUNK_SPANS": spans,
                "TOKENS": np.array([7], np.int32),
            }
        scores = np.array([0.2, 0.5, 0.3], np.float32)
        return {"SCORES": scores, "CHUNK_SCORES": scores[None], "CHUNK_SPANS": spans, "LOGITS": np.log(scores) + 1}

    async def tokenize(self, model, text, add_special_tokens, request_id=""):
        """Each character a token of id its code point, between [CLS] (101) and [SEP] (102) where asked."""
        self.sent.append((model, text, add_special_tokens))
        characters = text.decode("utf-8")
        ids, names = [ord(c) for c in characters], list(characters)
        spans = [[i, i + 1] for i in range(len(characters))]
        if add_special_tokens:
            ids, names, spans = [101, *ids, 102], ["[CLS]", *names, "[SEP]"], [[-1, -1], *spans, [-1, -1]]
        return {
            "TOKENIZED_IDS": np.array(ids, np.int32),
            "TOKENIZED_TEXTS": np.array([name.encode() for name in names], np.object_),
            "TOKENIZED_SPANS": np.array(spans, np.int32).reshape(-1, 2),
        }


@pytest.fixture
def client(contract):
    yield from running(contract, tei="encoder")


def running(contract, **settings):
    settings = DoorSettings(coalesce_in_flight=0, **settings)  # a request per text, which the fake answers
    upstream = FakeUpstream(settings, contract)
    with TestClient(create_app(contract, settings, upstream)) as test_client:
        test_client.upstream = upstream
        yield test_client


def test_openai_embeddings_answer_each_input_in_order_with_usage_in_the_models_tokens(client):
    answer = client.post("/v1/embeddings", json={"model": "encoder", "input": ["one", "two"]})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": [3.0, 4.0, 0.0]} for i in range(2)],
        "model": "encoder",
        "usage": {"prompt_tokens": 14, "total_tokens": 14},
    }
    assert client.upstream.sent == [("encoder", [b"one"]), ("encoder", [b"two"])]
    coded = client.post("/v1/embeddings", json={"model": "encoder", "input": "one", "encoding_format": "base64"}).json()
    vector = np.frombuffer(base64.b64decode(coded["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(vector, VECTOR)


@pytest.mark.parametrize(
    "body, param",
    [
        ({"model": "topics", "input": "a"}, "model"),  # a served model, but not an encoder
        ({"model": "encoder", "input": []}, "input"),
        ({"model": "encoder", "input": " "}, "input"),
        ({"model": "encoder", "input": [1, 2]}, "input"),  # token arrays are not taken
        ({"model": "encoder", "input": "a", "dimensions": 2}, "dimensions"),
        ({"model": "encoder", "input": "a", "encoding_format": "int8"}, "encoding_format"),
    ],
)
def test_a_bad_openai_request_gets_openais_error_shape_naming_the_field(client, body, param):
    answer = client.post("/v1/embeddings", json=body)
    assert answer.status_code == 422 and answer.headers["content-type"] == "application/json"
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request" and error["message"]
    assert error["param"].split(".")[0] == param, error
    assert client.upstream.sent == []


def test_openai_overload_is_a_429_in_openais_shape_with_retry_after(client):
    client.upstream.fail = Problem(429, "overloaded", "encoder: queue full", {"Retry-After": "3"})
    answer = client.post("/v1/embeddings", json={"model": "encoder", "input": "a"})
    assert answer.status_code == 429 and answer.headers["retry-after"] == "3"
    assert answer.json()["error"]["type"] == "rate_limit_error"


def test_openai_lists_every_served_model(client):
    answer = client.get("/v1/models").json()
    assert answer["object"] == "list"
    assert [(card["id"], card["object"]) for card in answer["data"]] == [("encoder", "model"), ("topics", "model")]


def test_keys_are_taken_as_a_bearer_token_and_refused_in_each_apis_shape(contract):
    for test_client in running(contract, api_keys=frozenset({"secret"}), tei="encoder"):
        refused = test_client.post(
            "/v1/embeddings", json={"model": "encoder", "input": "a"}, headers={"Authorization": "Bearer no"}
        )
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
        tei = test_client.post("/embed", json={"inputs": "a"})
        assert tei.status_code == 401 and tei.json()["error_type"] == "Validation" and "Bearer" in tei.json()["error"]
        bearer = {"Authorization": "Bearer secret"}
        assert test_client.post("/v1/embeddings", json={"model": "encoder", "input": "a"}, headers=bearer).status_code == 200
        assert test_client.post("/v1/topics", json={"text": "a"}, headers=bearer).status_code == 200
        assert test_client.post("/v1/topics", json={"text": "a"}, headers={"X-API-Key": "secret"}).status_code == 200
        assert test_client.get("/v1/models", headers=bearer).status_code == 200
        assert test_client.get("/v1/models").status_code == 401


def test_tei_embed_answers_a_list_of_vectors_normalised_unless_asked_not_to(client):
    assert client.post("/embed", json={"inputs": "one"}).json() == [[0.6, 0.8, 0.0]]
    raw = client.post("/embed", json={"inputs": ["one", "two"], "normalize": False, "truncate": True}).json()
    assert raw == [[3.0, 4.0, 0.0], [3.0, 4.0, 0.0]]
    info = client.get("/info").json()
    assert info["model_id"] == "encoder" and info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert info["max_input_length"] == 512 and info["max_client_batch_size"] == 64
    assert client.post("/predict", json={"inputs": "a"}).status_code == 404, "an encoder's TEI has no /predict"


@pytest.mark.parametrize(
    "body, status",
    [({"inputs": []}, 422), ({"inputs": "  "}, 422), ({"inputs": "a", "prompt_name": "query"}, 422), (b"{", 400)],
)
def test_a_bad_tei_request_gets_teis_error_shape(client, body, status):
    answer = client.post(
        "/embed",
        **({"content": body, "headers": {"content-type": "application/json"}} if isinstance(body, bytes) else {"json": body}),
    )
    assert answer.status_code == status and set(answer.json()) == {"error", "error_type"}, answer.text
    assert answer.json()["error_type"] == "Validation"


def test_tei_predict_answers_labels_best_first_for_a_text_and_for_a_batch(contract):
    for test_client in running(contract, tei="topics"):
        best_first = [{"score": 0.5, "label": "politics"}, {"score": 0.3, "label": "science"}, {"score": 0.2, "label": "sport"}]
        for inputs in ("a text", ["a text"]):
            answer = test_client.post("/predict", json={"inputs": inputs}).json()
            assert [(p["label"], round(p["score"], 6)) for p in answer] == [(p["label"], p["score"]) for p in best_first]
        batch = test_client.post("/predict", json={"inputs": [["one"], ["two"]]}).json()
        assert len(batch) == 2 and [p["label"] for p in batch[1]] == ["politics", "science", "sport"]
        assert test_client.post("/predict", json={"inputs": ["query", "document"]}).status_code == 422, "no pairs"
        raw = test_client.post("/predict", json={"inputs": "a", "raw_scores": True}).json()
        assert [(p["label"], round(p["score"], 5)) for p in raw] == [
            (p["label"], round(float(np.log(np.float32(p["score"])) + 1), 5)) for p in best_first
        ]
        assert test_client.post("/predict", json={"inputs": "a", "raw_scores": "maybe"}).status_code == 422
        info = test_client.get("/info").json()["model_type"]["classifier"]
        assert info == {
            "id2label": {"0": "sport", "1": "politics", "2": "science"},
            "label2id": {"sport": 0, "politics": 1, "science": 2},
        }


def test_a_tei_model_that_is_not_served_or_not_a_text_encoder_or_classifier_stops_the_door(contract, radar_artifacts):
    with pytest.raises(ContractError, match="no such model"):
        tei_model(contract, "missing")
    radar = contract_from_configs({"radar": configs("cpu", specs={})["radar"]})
    with pytest.raises(ContractError, match="answers text-score"):
        tei_model(dataclasses.replace(radar, canary=None), "radar")


def test_tei_tokenize_answers_each_texts_tokens_in_teis_shape_offsets_in_utf8_bytes(client):
    answer = client.post("/tokenize", json={"inputs": "aé😀"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == [
        [
            {"id": 101, "text": "[CLS]", "special": True, "start": None, "stop": None},
            {"id": 97, "text": "a", "special": False, "start": 0, "stop": 1},
            {"id": 233, "text": "é", "special": False, "start": 1, "stop": 3},
            {"id": 128512, "text": "😀", "special": False, "start": 3, "stop": 7},
            {"id": 102, "text": "[SEP]", "special": True, "start": None, "stop": None},
        ]
    ]
    plain = client.post("/tokenize", json={"inputs": ["ab", "c"], "add_special_tokens": False}).json()
    assert [[token["text"] for token in tokens] for tokens in plain] == [["a", "b"], ["c"]]
    assert client.upstream.sent[-2:] == [("encoder", b"ab", False), ("encoder", b"c", False)]
    refused = client.post("/tokenize", json={"inputs": []})
    assert refused.status_code == 422 and refused.json()["error_type"] == "Validation"
