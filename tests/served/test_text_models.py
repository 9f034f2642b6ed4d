"""Text classifiers a user brings as Hugging Face checkpoints (`kit add NAME --task text-classification --from DIR`,
nothing else; tests.served.conftest.TEXT_CLASSIFIERS): a BERT and a DistilBERT with labels of their own, served on
the real server beside the shipped models. Their answers equal PyTorch's on the same chunks, texts of a batched
door request equal the same texts sent alone, concurrent texts share executions, bad input fails alone, and the
door serves each on its route with its labels in the OpenAPI document."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from clients.text import TextClassifierClient
from kit.control.configs import REPO_ROOT, parameters
from kit.control.exports import export_python
from kit.control.repository import plan
from kit.control.text_task import names
from perf.sim.device import SIM
from samples.texts import MULTILINGUAL, sample_texts
from tests.served.conftest import TEXT_CLASSIFIERS, TEXT_ENCODERS, TEXT_SCORERS
from tests.served.doors import answer_schema, answers_as_alone, assert_problem, call, client_on
from tests.served.text_specs import ask, assert_empty_text_fails_alone, assert_texts_share_executions

OUTPUTS = ("SCORES", "CHUNK_SCORES", "CHUNK_SPANS")
# Served (the fused ONNX graph, chunks padded to length buckets, batched) against PyTorch on each chunk alone.
ATOL = 1e-4
TEXTS = [
    "The match ended in a draw after extra time.",
    " ".join(sample_texts(count=3, min_chars=300, max_chars=700, seed=11)),  # several chunks under either model
    MULTILINGUAL[0],
    "Short.",
]


def pytorch(checkpoint, texts: list[str], max_chars: int) -> list[dict]:
    """Each text through PyTorch (tests.checkpoints reference, in the export venv): every chunk alone."""
    command = [export_python(), "-m", "tests.checkpoints", "reference", "--model", str(checkpoint), "--max-chars", str(max_chars)]
    done = subprocess.run(command, cwd=REPO_ROOT, input=json.dumps(texts), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def classify(url: str, model: str, text: str) -> dict[str, np.ndarray]:
    return ask(url, model, text, OUTPUTS)


@pytest.fixture(scope="module")
def references(brought_models, checkpoints) -> dict[str, list[dict]]:
    return {
        name: pytorch(checkpoints / checkpoint, TEXTS, brought_models[name].max_chars)
        for name, (checkpoint, _) in TEXT_CLASSIFIERS.items()
    }


@pytest.mark.parametrize("model", sorted(TEXT_CLASSIFIERS))
def test_served_label_probabilities_equal_pytorch_on_the_same_chunks(model, server, references):
    assert any(len(answer["spans"]) > 1 for answer in references[model]), "no text of the check took several chunks"
    for text, want in zip(TEXTS, references[model]):
        got = classify(server.options.grpc_url, model, text)
        np.testing.assert_array_equal(got["CHUNK_SPANS"], np.array(want["spans"]).reshape(-1, 2))
        np.testing.assert_allclose(got["CHUNK_SCORES"], want["chunk_scores"], atol=ATOL, err_msg=f"{model}: {text[:40]}")
        np.testing.assert_allclose(got["SCORES"], want["scores"], atol=ATOL, err_msg=f"{model}: {text[:40]}")


def as_alone(references, model: str):
    """Each answer's SCORES equals its text's reference, as the text sent alone."""

    def check(i, answer):
        np.testing.assert_allclose(answer["SCORES"], references[model][i]["scores"], atol=ATOL)

    return check


@pytest.mark.parametrize("model", sorted(TEXT_CLASSIFIERS))
def test_concurrent_texts_share_executions(model, grpc_client, server, references):
    assert_texts_share_executions(grpc_client, server.options.grpc_url, model, TEXTS, OUTPUTS, as_alone(references, model))


@pytest.mark.parametrize("model", sorted(TEXT_CLASSIFIERS))
def test_an_empty_text_fails_alone_among_good_ones(model, server, references):
    assert_empty_text_fails_alone(server.options.grpc_url, model, TEXTS, OUTPUTS, as_alone(references, model))


@pytest.mark.parametrize("model", sorted(TEXT_CLASSIFIERS))
def test_the_door_serves_a_text_classifier_by_its_labels(model, door, brought_models, checkpoints, references):
    labels = json.loads((checkpoints / TEXT_CLASSIFIERS[model][0] / "config.json").read_text())["id2label"]
    labels = [labels[str(i)] for i in range(len(labels))]
    route = brought_models[model].door_route
    for answer, want in zip(answers_as_alone(door, route, TEXTS), references[model]):
        assert list(answer["scores"]) == labels and answer["label"] == labels[int(np.argmax(want["scores"]))]
        np.testing.assert_allclose([answer["scores"][label] for label in labels], want["scores"], atol=ATOL)
        assert [[c["start"], c["end"]] for c in answer["chunks"]] == want["spans"]
    schema, _ = answer_schema(door, route)
    assert schema["properties"]["label"]["enum"] == labels


@pytest.mark.parametrize("protocol", ["grpc", "http", "door"])
def test_the_generic_client_answers_by_label_on_every_transport(protocol, server, door, references, checkpoints):
    """clients.text with nothing but the model's name: the labels from the served config (or the door's answer)."""
    labels = json.loads((checkpoints / "bert" / "config.json").read_text())["id2label"]
    with client_on(protocol, server, door, TextClassifierClient, "topics") as client:
        results = client.classify_many(TEXTS)
    for result, want in zip(results, references["topics"]):
        assert list(result.scores) == [labels[str(i)] for i in range(len(labels))]
        np.testing.assert_allclose(list(result.scores.values()), want["scores"], atol=ATOL)
        assert [[start, end] for start, end, _ in result.chunks] == want["spans"]
        np.testing.assert_allclose([list(c.values()) for _, _, c in result.chunks], want["chunk_scores"], atol=ATOL)


@pytest.mark.parametrize("model", sorted(TEXT_CLASSIFIERS))
def test_the_door_refuses_an_empty_text_with_a_clear_4xx(model, door, brought_models):
    answer = call(door, "POST", brought_models[model].door_route, json={"texts": ["A good text.", " "]})
    body = assert_problem(answer, 422, "invalid-request")
    assert "texts" in body["detail"], body


@pytest.mark.parametrize("profile", ["cpu", "gpu", "gpu-embedded", SIM / "sim-h100.json"])
def test_a_text_model_is_placed_in_every_profile_as_radar_is(profile, brought_models):
    """Built for each profile, the three models of a text spec (a classifier's or an encoder's) run where RADAR's run
    (the simulated device aside, which only RADAR's measured curve can drive), and the graph model serves the export's
    graph or checkpoint."""
    planned = plan(profile, specs=brought_models)
    configs = {name: model.written() for name, model in planned.items()}
    files = {name: model.files for name, model in planned.items()}
    for model in (*TEXT_CLASSIFIERS, *TEXT_ENCODERS):
        own = names(brought_models[model])
        for part, radar in (("entry", "radar"), ("texts", "radar_texts"), ("classifier", "radar_classifier")):
            config, shipped = configs[own[part]], configs[radar]
            assert (config.platform, config.max_batch_size) == (shipped.platform, shipped.max_batch_size)
            if profile != SIM / "sim-h100.json":
                assert (config.backend, list(config.instance_group)) == (shipped.backend, list(shipped.instance_group))
        classifier = parameters(configs[own["classifier"]])
        served = classifier.get("onnx_model") or classifier.get("torch_model")
        assert served is None or served in files[own["classifier"]], f"{profile}: {served} is not in the version folder"
        # Where RADAR's graph has no queue policy (the GPU profiles), the spec's has none either: its batcher gathers
        # the next batch while the device runs one, bounded by the texts model's window (the build checks it).
        policy = configs[own["classifier"]].dynamic_batching.default_queue_policy
        assert policy == configs["radar_classifier"].dynamic_batching.default_queue_policy
        assert (policy.max_queue_size > 0) == (profile == "cpu")


@pytest.mark.parametrize("model", sorted(TEXT_SCORERS))
def test_a_scorer_answers_one_labels_probability_as_radar_does(model, server, door, brought_models, checkpoints):
    """`score_label`: the entry answers SCORE and CHUNK_SCORES, that label's column of what PyTorch computes, and the
    door's route answers {score, chunks}, a text of a batched request as it is alone."""
    checkpoint, (_, label) = checkpoints / TEXT_SCORERS[model][0], TEXT_SCORERS[model][1]
    labels = json.loads((checkpoint / "config.json").read_text())["id2label"]
    column = [labels[str(i)] for i in range(len(labels))].index(label)
    wanted = pytorch(checkpoint, TEXTS, brought_models[model].max_chars)
    route = brought_models[model].door_route
    together = call(door, "POST", route, json={"texts": TEXTS})
    assert together.status == 200, together.data[:500]
    for text, answer, want in zip(TEXTS, together.json(), wanted):
        got = ask(server.options.grpc_url, model, text, ("SCORE", "CHUNK_SCORES", "CHUNK_SPANS"))
        np.testing.assert_allclose(got["SCORE"], [want["scores"][column]], atol=ATOL, err_msg=text[:40])
        np.testing.assert_allclose(got["CHUNK_SCORES"], np.array(want["chunk_scores"])[:, column], atol=ATOL)
        np.testing.assert_array_equal(got["CHUNK_SPANS"], np.array(want["spans"]).reshape(-1, 2))
        assert call(door, "POST", route, json={"text": text}).json() == answer
        assert answer["score"] == pytest.approx(float(got["SCORE"][0]), abs=1e-6)
        assert [[c["start"], c["end"]] for c in answer["chunks"]] == want["spans"]
    operation = call(door, "GET", "/openapi.json").json()["paths"][route]["post"]
    assert label in operation["description"]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema["anyOf"][0]["$ref"].endswith("/ScienceScoreResult")
