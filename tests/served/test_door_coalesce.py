"""The door's coalescing (door.coalesce) on the session's real server: the texts of one call, OpenAI's `input` list and
texts of concurrent calls reach a text entry as one request (Triton's statistics count it), each answered as it is
alone; a text the entry refuses fails alone, the others of its request answered. Concurrent calls' images reach an
image classifier's entry the same way."""

from __future__ import annotations

import asyncio

import numpy as np

from door.contract import contract_from_configs, served_configs
from door.problems import Problem
from door.settings import DoorSettings
from door.upstream import Upstream
from kit.control.image_task import names
from tests.served.doors import call
from tests.served.statistics import counted, executions
from tests.served.test_embedding_models import BATCHING_ATOL
from tests.served.test_image_models import ATOL, IMAGES, classify
from tests.served.test_text_models import OUTPUTS, TEXTS
from tests.served.text_specs import ask

CLASSIFIER, ENCODER = "topics", "sentences"  # not the canary's model, whose golden set the door may send meanwhile
IMAGER = "pets"  # an image classifier a user brought (tests.served.conftest.IMAGE_CLASSIFIERS)


def requests_for(grpc_client, model: str, send, wanted: int = 1) -> int:
    """The requests Triton counted on `model` while `send()` ran, read once it counted at least `wanted`."""
    before = executions(grpc_client, model)
    send()
    return counted(grpc_client, {model: before}, {model: wanted})[model][0]


def test_a_calls_texts_reach_the_entry_as_one_request_each_answered_as_alone(door, grpc_client, brought_models):
    route = brought_models[CLASSIFIER].door_route
    alone = [call(door, "POST", route, json={"text": text}).json() for text in TEXTS]
    together = []
    assert requests_for(grpc_client, CLASSIFIER, lambda: together.append(call(door, "POST", route, json={"texts": TEXTS}))) == 1
    assert together[0].status == 200, together[0].data[:500]
    for got, want in zip(together[0].json(), alone):
        assert [c["start"] for c in got["chunks"]] == [c["start"] for c in want["chunks"]]
        np.testing.assert_allclose(list(got["scores"].values()), list(want["scores"].values()), atol=BATCHING_ATOL)


def test_openais_input_list_reaches_the_encoder_as_one_request(door, grpc_client):
    body = {"model": ENCODER, "input": TEXTS}
    answers = []
    assert requests_for(grpc_client, ENCODER, lambda: answers.append(call(door, "POST", "/v1/embeddings", json=body))) == 1
    assert answers[0].status == 200, answers[0].data[:500]
    for i, (item, text) in enumerate(zip(answers[0].json()["data"], TEXTS)):
        one = call(door, "POST", "/v1/embeddings", json={"model": ENCODER, "input": text}).json()["data"][0]
        assert item["index"] == i
        np.testing.assert_allclose(item["embedding"], one["embedding"], atol=BATCHING_ATOL)


def upstream_outcomes(server, items: list[bytes], model: str = CLASSIFIER) -> list:
    """The door's Upstream, on the real server, asked for each text (or each image, of an image classifier) by a call
    of its own, all in one turn of the loop: what each call got, an answer or its Problem."""
    contract = contract_from_configs(served_configs(server.options.grpc_url, wait=10))

    async def ask():
        upstream = Upstream(DoorSettings(triton=server.options.grpc_url), contract)
        await upstream.open()
        try:
            if model == CLASSIFIER:
                calls = [upstream.infer_texts(model, [item], f"r{i}") for i, item in enumerate(items)]
            else:
                calls = [upstream.infer_image(model, item, f"r{i}") for i, item in enumerate(items)]
            return await asyncio.gather(*calls, return_exceptions=True)
        finally:
            await upstream.close()

    return asyncio.run(ask())


def test_concurrent_calls_texts_go_in_one_request_and_each_gets_its_own_answer(server, grpc_client):
    texts = [text.encode() for text in TEXTS]
    outcomes = []
    assert requests_for(grpc_client, CLASSIFIER, lambda: outcomes.extend(upstream_outcomes(server, texts))) == 1
    for text, (outcome,) in zip(TEXTS, outcomes):
        alone = ask(server.options.grpc_url, CLASSIFIER, text, OUTPUTS)
        assert outcome["CHUNKS"].tolist() == [len(alone["CHUNK_SPANS"])]
        np.testing.assert_array_equal(outcome["CHUNK_SPANS"], alone["CHUNK_SPANS"])
        for name in ("SCORES", "CHUNK_SCORES"):
            np.testing.assert_allclose(outcome[name], alone[name], atol=BATCHING_ATOL)


def test_a_text_the_entry_refuses_fails_alone_and_the_others_of_its_request_are_answered(server, grpc_client):
    texts = [TEXTS[0].encode(), b"\xff not UTF-8", TEXTS[3].encode()]
    outcomes = []
    # NAME_texts counts every request it answers, refused ones too (the ensemble counts a refusal twice).
    sent = requests_for(grpc_client, f"{CLASSIFIER}_texts", lambda: outcomes.extend(upstream_outcomes(server, texts)), 4)
    assert sent == 4, "the request of all three, then each text alone"
    good, bad, other = outcomes
    assert isinstance(bad, Problem) and bad.status == 422 and "not valid UTF-8" in str(bad), bad
    assert good[0]["SCORES"].shape == (3,) and other[0]["SCORES"].shape == (3,)


def test_concurrent_calls_images_reach_the_image_classifier_as_one_request_each_answered_as_alone(server, grpc_client):
    outcomes = []
    assert requests_for(grpc_client, IMAGER, lambda: outcomes.extend(upstream_outcomes(server, IMAGES, IMAGER))) == 1
    for data, outcome in zip(IMAGES, outcomes):
        np.testing.assert_allclose(outcome["SCORES"], classify(server.options.grpc_url, IMAGER, data), atol=ATOL)


def test_an_image_the_classifier_refuses_fails_alone_and_the_others_of_its_request_are_answered(
    server, grpc_client, brought_models
):
    images = [IMAGES[0], b"not an image at all", IMAGES[2]]
    pixels = names(brought_models[IMAGER])["pixels"]
    outcomes = []
    sent = requests_for(grpc_client, pixels, lambda: outcomes.extend(upstream_outcomes(server, images, IMAGER)), 4)
    assert sent == 4, "the request of all three, then each image alone"
    good, bad, other = outcomes
    assert isinstance(bad, Problem) and bad.status == 422 and "IMAGE" in str(bad), bad
    for data, outcome in ((IMAGES[0], good), (IMAGES[2], other)):  # asked alone: SCORES [1, labels]
        np.testing.assert_allclose(outcome["SCORES"].reshape(-1), classify(server.options.grpc_url, IMAGER, data), atol=ATOL)
