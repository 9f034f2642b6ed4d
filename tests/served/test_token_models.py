"""Token classifiers a user brings as Hugging Face checkpoints (`kit add NAME --task token-classification --from DIR`,
nothing else; tests.served.conftest.TOKEN_CLASSIFIERS): a BERT and a DeBERTa-v2, served on the real server beside the
shipped models. Their entities equal `transformers`' own token-classification pipeline in process (aggregation
"simple", the same stride) on the same texts, texts longer than the model's limit included: words, labels and offsets
exactly, scores within 1e-4.

The checkpoints have random weights, which label tokens near-uniformly at random, so that an entity would rarely be
longer than a token. Their heads are biased (tests.checkpoints.TAGGER_BIAS: O first, I- over B-): most tokens are no
entity and most entities are runs of several tokens, so the grouping of tokens into entities, and the merge of the
entities that overlapping windows both found, are what the comparison checks. Concurrent texts share the tokens model's
executions, bad input fails alone, the door serves each on its route with its entity types in the OpenAPI document,
and the client answers the same over gRPC, HTTP and the door."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from clients.entities import TokenClassifierClient
from kit.control.configs import REPO_ROOT
from kit.control.exports import export_python, exported
from kit.control.token_task import EXPORTER, names
from perf.sim.device import SIM
from samples.texts import MULTILINGUAL, sample_texts
from tests.served.conftest import TOKEN_CLASSIFIERS
from tests.served.doors import answer_schema, answers_as_alone, assert_problem, call, client_on, named
from tests.served.text_specs import ask, assert_placed_as_radar, assert_texts_share_executions

OUTPUTS = ("ENTITY_LABELS", "ENTITY_SCORES", "ENTITY_SPANS", "ENTITY_WORDS", "CHUNK_SPANS", "TOKENS")
ATOL = 1e-4  # served (ONNX Runtime, windows padded to length buckets, batched) against the pipeline on each text alone
TEXTS = [
    "Ada Lovelace met Charles Babbage in London to talk about the Analytical Engine.",
    " ".join(sample_texts(count=4, min_chars=300, max_chars=700, seed=13)),  # several windows under either model
    MULTILINGUAL[0] + " " + MULTILINGUAL[2],  # unknown characters: a word named by the text it covers
    "OK",
]


def stride(spec) -> int:
    """The tokens the spec's windows share, as its export resolved them."""
    return exported(spec, EXPORTER)["stride"]


def pipeline(checkpoint, texts: list[str], shared: int) -> list[list[dict]]:
    """Each text through `transformers`' pipeline (tests.checkpoints tag, in the export venv)."""
    command = [export_python(), "-m", "tests.checkpoints", "tag", "--model", str(checkpoint), "--stride", str(shared)]
    done = subprocess.run(command, cwd=REPO_ROOT, input=json.dumps(texts), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def references(brought_models, checkpoints) -> dict[str, list[list[dict]]]:
    return {
        name: pipeline(checkpoints / checkpoint, TEXTS, stride(brought_models[name]))
        for name, (checkpoint, _) in TOKEN_CLASSIFIERS.items()
    }


def entities(answer: dict[str, np.ndarray]) -> list[tuple]:
    """The entry's entities as (label, word, start, end), and their scores."""
    labels, words = answer["ENTITY_LABELS"].reshape(-1), answer["ENTITY_WORDS"].reshape(-1)
    spans = answer["ENTITY_SPANS"].reshape(-1, 2)
    return [(label.decode(), word.decode(), int(s), int(e)) for label, word, (s, e) in zip(labels, words, spans)]


def assert_equal(got: dict[str, np.ndarray], want: list[dict], what: str) -> None:
    assert entities(got) == [(e["entity_group"], e["word"], e["start"], e["end"]) for e in want], what
    np.testing.assert_allclose(got["ENTITY_SCORES"].reshape(-1), [e["score"] for e in want], atol=ATOL, err_msg=what)


@pytest.mark.parametrize("model", sorted(TOKEN_CLASSIFIERS))
def test_served_entities_equal_the_transformers_pipeline_on_the_same_texts(model, server, brought_models, references):
    shared = stride(brought_models[model])
    for text, want in zip(TEXTS, references[model]):
        got = ask(server.options.grpc_url, model, text, OUTPUTS)
        assert_equal(got, want, f"{model}: {text[:40]}")
        windows = got["CHUNK_SPANS"].reshape(-1, 2)
        assert got["TOKENS"][0] >= len(windows) * 2 and windows[0][0] <= windows[-1][0]
    long_text, long_windows = TEXTS[1], ask(server.options.grpc_url, model, TEXTS[1], OUTPUTS)
    windows = long_windows["CHUNK_SPANS"].reshape(-1, 2)
    assert len(windows) >= 3, f"{model}: the long text took {len(windows)} windows"
    overlaps = [(int(after[0]), int(before[1])) for before, after in zip(windows, windows[1:])]
    found = entities(long_windows)
    assert all(start < end for start, end in overlaps), f"consecutive windows share {shared} tokens"
    assert any(start <= e[2] < end for e in found for start, end in overlaps), "no entity lies where two windows overlap"
    assert any(" " in long_text[e[2] : e[3]].strip() for e in found), "no entity of several words"
    assert found[-1][2] > windows[0][1], "no entity beyond the first window"


@pytest.mark.parametrize("model", sorted(TOKEN_CLASSIFIERS))
def test_concurrent_texts_share_executions_and_each_is_answered_as_alone(model, grpc_client, server, references):
    def check(i, answer):
        assert_equal(answer, references[model][i], f"{model}: text {i}")

    url = server.options.grpc_url
    assert_texts_share_executions(grpc_client, url, model, TEXTS, OUTPUTS, check, texts_model=f"{model}_tokens")


def test_an_empty_text_and_one_not_utf8_fail_alone_among_good_ones(server, references):
    url = server.options.grpc_url

    def raw(data: bytes):
        client = grpcclient.InferenceServerClient(url)
        try:
            tensor = grpcclient.InferInput("TEXT", [1], "BYTES")
            tensor.set_data_from_numpy(np.array([data], dtype=np.object_))
            return client.infer("entities", [tensor])
        finally:
            client.close()

    with ThreadPoolExecutor(10) as pool:
        good = [pool.submit(ask, url, "entities", text, OUTPUTS) for text in TEXTS * 2]
        bad = {"empty": pool.submit(raw, b" \n "), "not valid UTF-8": pool.submit(raw, b"\xff\xfe not UTF-8")}
        for words, answer in bad.items():
            with pytest.raises(InferenceServerException) as caught:
                answer.result()
            assert caught.value.status() == "StatusCode.INVALID_ARGUMENT" and words in caught.value.message()
        for i, answer in enumerate(good):
            assert_equal(answer.result(), references["entities"][i % len(TEXTS)], f"text {i}")


@pytest.mark.parametrize("model", sorted(TOKEN_CLASSIFIERS))
def test_the_door_serves_a_token_classifier_by_its_entity_types(model, door, brought_models, references):
    route = brought_models[model].door_route
    for answer, want in zip(answers_as_alone(door, route, TEXTS), references[model]):
        assert [(e["label"], e["word"], e["start"], e["end"]) for e in answer["entities"]] == [
            (e["entity_group"], e["word"], e["start"], e["end"]) for e in want
        ]
        np.testing.assert_allclose([e["score"] for e in answer["entities"]], [e["score"] for e in want], atol=ATOL)
    schema, components = answer_schema(door, route)
    entity = components[named(schema["properties"]["entities"]["items"])]
    assert entity["properties"]["label"]["enum"] == ["PER", "LOC"]
    body = assert_problem(call(door, "POST", route, json={"texts": ["A good text.", " "]}), 422, "invalid-request")
    assert "texts" in body["detail"], body


@pytest.mark.parametrize("protocol", ["grpc", "http", "door"])
def test_the_token_client_answers_on_every_transport(protocol, server, door, references):
    with client_on(protocol, server, door, TokenClassifierClient, "pii") as client:
        results = client.entities_many(TEXTS)
    for result, want in zip(results, references["pii"]):
        assert [(e.label, e.word, e.start, e.end) for e in result.entities] == [
            (e["entity_group"], e["word"], e["start"], e["end"]) for e in want
        ]
        np.testing.assert_allclose([e.score for e in result.entities], [e["score"] for e in want], atol=ATOL)


@pytest.mark.parametrize("profile", ["cpu", "gpu", "gpu-embedded", SIM / "sim-h100.json"])
def test_a_token_classifier_is_placed_in_every_profile_as_radar_is(profile, brought_models):
    """Built for each profile, a token-classification spec's three models run where RADAR's run (the simulated device
    aside, which only RADAR's measured curve can drive), its graph answering a row of label logits per token, and
    bounded as RADAR's graph is."""
    classifiers = assert_placed_as_radar(profile, brought_models, sorted(TOKEN_CLASSIFIERS), names, "tokens")
    for classifier in classifiers.values():
        assert list(classifier.output[0].dims) == [-1, 5]
