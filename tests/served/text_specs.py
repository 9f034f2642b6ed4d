"""What the served tests of the text models a spec brings share (test_text_models, test_embedding_models): one text
to an entry over gRPC, and the two batching checks every text model owes: concurrent texts share the texts model's
executions (Triton's statistics) and each is answered as alone; an empty text fails alone among good ones."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from kit.control.configs import parameters
from kit.control.repository import plan
from perf.sim.device import SIM
from tests.served.statistics import counted, executions

# check(i, answer): the answer to the i-th text sent equals that text's reference
Check = Callable[[int, dict[str, np.ndarray]], None]


def ask(url: str, model: str, text: str, outputs: tuple[str, ...]) -> dict[str, np.ndarray]:
    client = grpcclient.InferenceServerClient(url)
    try:
        tensor = grpcclient.InferInput("TEXT", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([text.encode("utf-8")], dtype=np.object_))
        result = client.infer(model, [tensor])
        return {name: result.as_numpy(name) for name in outputs}
    finally:
        client.close()


def assert_texts_share_executions(
    grpc_client, url: str, model: str, texts: list[str], outputs: tuple, check: Check, texts_model: str = ""
) -> None:
    """32 clients at once, each text sent 32 times: the texts model's (NAME_texts unless named) executions carry several
    texts, each answered as alone."""
    texts_model = texts_model or f"{model}_texts"
    before = executions(grpc_client, texts_model)
    sent = texts * 32
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda text: ask(url, model, text, outputs), sent))
    requests, runs = counted(grpc_client, {texts_model: before}, {texts_model: len(sent)})[texts_model]
    assert requests == len(sent)
    assert runs < requests, f"{runs} executions for {requests} texts: none carried more than one"
    for i, answer in enumerate(answers):
        check(i % len(texts), answer)


def assert_empty_text_fails_alone(url: str, model: str, texts: list[str], outputs: tuple, check: Check) -> None:
    with ThreadPoolExecutor(9) as pool:
        good = [pool.submit(ask, url, model, text, outputs) for text in texts * 2]
        bad = pool.submit(ask, url, model, "  \n ", outputs)
        with pytest.raises(InferenceServerException) as caught:
            bad.result()
        for i, answer in enumerate(good):
            check(i % len(texts), answer.result())
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "empty" in caught.value.message(), caught.value.message()


def assert_placed_as_radar(profile, specs: dict, models: list[str], names: Callable, middle: str) -> dict:
    """Built for `profile`, each of `models` (specs of a task whose `names` give its entry, its `middle` model and its
    classifier) runs where RADAR's three models run (the simulated device's instances aside, which only RADAR's
    measured curve can drive), serves a graph its version folder holds, and is bounded as RADAR's graph is; each one's
    classifier config, for the task's own checks."""
    planned = plan(profile, specs=specs)
    configs = {name: model.written() for name, model in planned.items()}
    classifiers = {}
    for model in models:
        own = names(specs[model])
        for part, radar in (("entry", "radar"), (middle, "radar_texts"), ("classifier", "radar_classifier")):
            config, shipped = configs[own[part]], configs[radar]
            assert (config.platform, config.max_batch_size) == (shipped.platform, shipped.max_batch_size)
        classifier = configs[own["classifier"]]
        served = parameters(classifier).get("onnx_model") or parameters(classifier).get("torch_model")
        folder = planned[own["classifier"]].files
        assert served is None or served in folder, f"{profile}: {served} is not in the version folder"
        if profile != SIM / "sim-h100.json":
            assert list(classifier.instance_group) == list(configs["radar_classifier"].instance_group)
        policy = classifier.dynamic_batching.default_queue_policy
        assert policy == configs["radar_classifier"].dynamic_batching.default_queue_policy
        classifiers[model] = classifier
    return classifiers
