"""Users' own pre- and post-processing (`kit add NAME --task pipeline --from MODULE.py`, nothing else): each module
of tests/pipelines/ served on the real server beside the shipped models answers what the same module computes in
this process over ONNX Runtime (and, for `tabular`, what its graph computes by hand), the rows of a request equal
the rows sent alone, concurrent requests share their networks' executions, bad input fails alone, and the door
serves each on its route."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest
from tritonclient.utils import InferenceServerException

from kit.adapters.custom_pipeline import in_process_networks, load_definition
from kit.control.specs import ModelSpec
from kit.pipelines.custom import answer
from tests.served.conftest import PIPELINES
from tests.served.doors import assert_problem, call
from tests.served.statistics import counted, executions
from tests.served.tensors import infer

RTOL, ATOL = 1e-5, 1e-6
TEXTS = [b"the cat sat", b"a long line of several words here", b"one", "\u00e9t\u00e9 au caf\u00e9".encode()]


def rows(model: str, count: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if model == "tabular":
        values = rng.standard_normal((count, 8)).astype(np.float32)
        return {"values": values, "scale": rng.uniform(0.5, 2.0, (count, 1)).astype(np.float32)}
    return {"text": np.array([[TEXTS[(seed + i) % len(TEXTS)]] for i in range(count)], dtype=object)}


def in_process(spec: ModelSpec, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The spec's module run in this process, its networks by ONNX Runtime."""
    pipeline = load_definition(spec.source_path)
    networks = in_process_networks(pipeline, spec.source_path.parent)
    return asyncio.run(answer(pipeline, inputs, networks))


OUTPUTS = {"tabular": ["label", "top", "probs"], "words": ["words", "probs"]}


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    for name, value in want.items():
        assert got[name].shape == value.shape, name
        if value.dtype == object:
            assert got[name].tolist() == value.tolist(), name
        else:
            np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("model", sorted(PIPELINES))
def test_a_pipeline_answers_what_its_module_computes_in_process(model, brought_models, url, protocol):
    inputs = rows(model, 4, seed=1)
    assert_same(infer(url, protocol, model, inputs, OUTPUTS[model]), in_process(brought_models[model], inputs))


def test_the_tabular_pipeline_answers_what_its_graph_computes_by_hand(brought_models, server):
    """An independent reference: the module's arithmetic written out here over the graph itself."""
    spec = brought_models["tabular"]
    inputs = rows("tabular", 5, seed=2)
    session = ort.InferenceSession(str(spec.source_path.parent / "scorer.onnx"), providers=["CPUExecutionProvider"])
    (probs,) = session.run(["probs"], {"features": inputs["values"] / inputs["scale"]})
    served = infer(server.options.grpc_url, "grpc", "tabular", inputs, OUTPUTS["tabular"])
    np.testing.assert_allclose(served["probs"], probs, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(served["top"][:, 0], probs.max(axis=1), rtol=RTOL, atol=ATOL)
    assert [label[0] for label in served["label"].tolist()] == [[b"low", b"mid", b"high", b"top"][i] for i in probs.argmax(1)]


@pytest.mark.parametrize("model", sorted(PIPELINES))
def test_rows_of_a_pipeline_request_equal_the_same_rows_sent_alone(model, server):
    url = server.options.grpc_url
    inputs = rows(model, 5, seed=3)
    batched = infer(url, "grpc", model, inputs, OUTPUTS[model])
    for i in range(5):
        alone = infer(url, "grpc", model, {k: v[i : i + 1] for k, v in inputs.items()}, OUTPUTS[model])
        assert_same({k: v[i : i + 1] for k, v in batched.items()}, alone)


def test_concurrent_pipeline_requests_share_their_networks_executions(grpc_client, server, brought_models):
    """The entry runs a batch of requests as one (one network call for all of them) and the network's batcher merges
    the calls of concurrent batches: either way, fewer network executions than requests."""
    before = {model: executions(grpc_client, model) for model in ("tabular", "tabular_scorer")}
    inputs = [rows("tabular", 1, seed=100 + i) for i in range(256)]
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda x: infer(server.options.grpc_url, "grpc", "tabular", x, ["probs"]), inputs))
    after = counted(grpc_client, before, {"tabular": 256})
    (requests, _), (calls, runs) = after["tabular"], after["tabular_scorer"]
    assert requests == 256 and 0 < calls <= requests, (requests, calls)
    assert runs < requests, f"{runs} network executions for {requests} requests: nothing was batched"
    for x, got in zip(inputs, answers):
        np.testing.assert_allclose(got["probs"], in_process(brought_models["tabular"], x)["probs"], rtol=RTOL, atol=ATOL)


def test_two_pipelines_share_one_network_model_and_its_batcher(grpc_client, server, brought_models):
    """words maps its scorer to tabular's (`--network scorer=tabular_scorer`): the server has no model of its own
    for it, and every scorer call of both entries (one per execution, as each runs a batch of requests as one) lands
    in tabular_scorer, whose executions are fewer than the requests of both."""
    assert not any(m.name == "words_scorer" for m in grpc_client.get_model_repository_index().models)
    models = ("tabular", "words", "tabular_scorer")
    before = {model: executions(grpc_client, model) for model in models}
    work = [(model, rows(model, 1, seed=300 + i)) for i in range(128) for model in ("tabular", "words")]
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda w: infer(server.options.grpc_url, "grpc", w[0], w[1], OUTPUTS[w[0]]), work))
    after = counted(grpc_client, before, {"tabular": 128, "words": 128})
    (tabular, tabular_runs), (words, words_runs), (calls, runs) = (after[m] for m in models)
    assert tabular == words == 128, (tabular, words)
    assert calls == tabular_runs + words_runs, f"{calls} scorer calls for {tabular_runs} + {words_runs} entry executions"
    assert runs < tabular + words, f"{runs} scorer executions for {tabular + words} requests"
    for (model, x), got in zip(work, answers):
        assert_same(got, in_process(brought_models[model], x))


@pytest.mark.parametrize(
    "model, bad, words",
    [
        ("tabular", {"values": np.ones((1, 8), np.float32), "scale": np.zeros((1, 1), np.float32)}, "scale must be positive"),
        ("words", {"text": np.array([[b"   "]], dtype=object)}, "text has no words"),
        ("words", {"text": np.array([[b"\xff\xfe"]], dtype=object)}, "text is not UTF-8"),
        ("tabular", {"values": np.ones((1, 7), np.float32), "scale": np.ones((1, 1), np.float32)}, "[-1,8]"),
    ],
)
def test_bad_input_to_a_pipeline_fails_alone_with_a_clear_error(model, bad, words, server, brought_models):
    url = server.options.grpc_url
    good = [rows(model, 2, seed=200 + i) for i in range(12)]
    with ThreadPoolExecutor(len(good) + 1) as pool:
        answers = [pool.submit(infer, url, "grpc", model, x, OUTPUTS[model]) for x in good]
        refused = pool.submit(infer, url, "grpc", model, bad, OUTPUTS[model])
        with pytest.raises(InferenceServerException) as caught:
            refused.result()
        for x, got in zip(good, answers):
            assert_same(got.result(), in_process(brought_models[model], x))
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT" and words in caught.value.message(), caught.value
    assert infer(url, "grpc", model, good[0], OUTPUTS[model])  # still serving


def door_json(inputs: dict[str, np.ndarray]) -> dict:
    return {
        "inputs": {k: [[x.decode() if isinstance(x, bytes) else x for x in row] for row in v.tolist()] for k, v in inputs.items()}
    }


@pytest.mark.parametrize("model", sorted(PIPELINES))
def test_the_door_serves_a_pipeline_on_its_route_with_its_openapi_entry(model, door, brought_models):
    spec = brought_models[model]
    inputs = rows(model, 3, seed=4)
    reply = call(door, "POST", spec.door_route, json=door_json(inputs))
    assert reply.status == 200, reply.data[:500]
    want = in_process(spec, inputs)
    for name, value in want.items():
        got = reply.json()["outputs"][name]
        if value.dtype == object:
            assert got == [[x.decode() for x in row] for row in value.tolist()], name
        else:
            np.testing.assert_allclose(np.array(got), value, rtol=RTOL, atol=ATOL, err_msg=name)
    document = call(door, "GET", "/openapi.json").json()
    schema = document["paths"][spec.door_route]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert sorted(schema["properties"]["inputs"]["properties"]) == sorted(inputs)


def test_the_door_answers_a_pipeline_s_bad_input_with_a_4xx(door, brought_models):
    body = {"inputs": {"values": [[1.0] * 8], "scale": [[0.0]]}}
    problem = assert_problem(call(door, "POST", brought_models["tabular"].door_route, json=body), 422, "invalid-input")
    assert "scale must be positive" in problem["detail"], problem
