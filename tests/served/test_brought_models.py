"""Models a user brings as ONNX graphs (`kit add NAME --task onnx --from FILE`, nothing else): served on the
real server beside the shipped models, their answers equal ONNX Runtime's on the same graph, batched across
requests, a request of the wrong shape fails alone, and the door serves each on its route by tensor name."""

from __future__ import annotations

import functools
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from clients.base import ModelClient
from kit.control.specs import ModelSpec
from tests.served import tensors
from tests.served.conftest import BROUGHT
from tests.served.doors import assert_problem, call
from tests.served.statistics import counted, executions

# Served against direct: the same graph and kernels; the batch a row lands in may change float rounding.
RTOL, ATOL = 1e-5, 1e-6
OUTPUTS = {"scorer": ["probs"], "pooler": ["pooled", "count"]}


def rows(name: str, count: int, seed: int, length: int = 5) -> dict[str, np.ndarray]:
    """`count` rows of valid inputs for a brought graph."""
    rng = np.random.default_rng(seed)
    if name == "scorer":
        return {"features": rng.standard_normal((count, 8)).astype(np.float32)}
    mask = (rng.random((count, length)) < 0.7).astype(np.float32)
    return {"ids": rng.integers(0, 10, (count, length)).astype(np.int64), "mask": mask}


@functools.cache
def session(graph: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])


def direct(spec: ModelSpec, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph run on `inputs` in this process, by ONNX Runtime (one session per graph)."""
    names = [o.name for o in session(spec.source_path).get_outputs()]
    return dict(zip(names, session(spec.source_path).run(names, inputs)))


def refused_beside_good(url: str, spec: ModelSpec, good: list[dict], bad: dict, atol: float) -> InferenceServerException:
    """`bad` sent over gRPC among concurrent `good` requests: each good one answers what the graph computes (within
    RTOL and `atol`); the bad one's refusal is returned."""
    with ThreadPoolExecutor(len(good) + 1) as pool:
        answers = [pool.submit(infer, url, "grpc", spec.name, x) for x in good]
        refused = pool.submit(infer, url, "grpc", spec.name, bad)
        with pytest.raises(InferenceServerException) as caught:
            refused.result()
        for x, answer in zip(good, answers):
            for name, want in direct(spec, x).items():
                np.testing.assert_allclose(answer.result()[name].reshape(want.shape), want, rtol=RTOL, atol=atol)
    return caught.value


def infer(url: str, protocol: str, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return tensors.infer(url, protocol, model, inputs, OUTPUTS[model])


@pytest.mark.parametrize("model", sorted(BROUGHT))
def test_brought_model_answers_what_onnx_runtime_computes_on_its_graph(model, brought_models, url, protocol):
    inputs = rows(model, 4, seed=3)
    served = infer(url, protocol, model, inputs)
    want = direct(brought_models[model], inputs)
    for name, value in want.items():
        got = served[name].reshape(value.shape)
        assert got.dtype == value.dtype
        np.testing.assert_allclose(got, value, rtol=RTOL, atol=ATOL, err_msg=f"{model}.{name}")


@pytest.mark.parametrize("model", sorted(BROUGHT))
def test_rows_of_a_batched_request_equal_the_same_rows_sent_alone(model, grpc_client, server):
    inputs = rows(model, 6, seed=4)
    url = server.options.grpc_url
    batched = infer(url, "grpc", model, inputs)
    for i in range(6):
        alone = infer(url, "grpc", model, {k: v[i : i + 1] for k, v in inputs.items()})
        for name, value in alone.items():
            np.testing.assert_allclose(batched[name][i : i + 1], value, rtol=RTOL, atol=ATOL)


def test_concurrent_requests_of_a_brought_model_share_executions(grpc_client, server, brought_models):
    before = executions(grpc_client, "scorer")
    inputs = [rows("scorer", 1, seed=100 + i) for i in range(256)]
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda x: infer(server.options.grpc_url, "grpc", "scorer", x), inputs))
    requests, runs = counted(grpc_client, {"scorer": before}, {"scorer": 256})["scorer"]
    assert requests == 256
    assert runs < requests, f"{runs} executions for {requests} requests: Triton batched none of them"
    for x, answer in zip(inputs, answers):
        np.testing.assert_allclose(answer["probs"], direct(brought_models["scorer"], x)["probs"], rtol=RTOL, atol=ATOL)


def test_a_request_of_the_wrong_shape_fails_alone_with_a_clear_error(server, brought_models):
    good = [rows("scorer", 1, seed=200 + i) for i in range(16)]
    wrong = {"features": np.zeros((1, 7), dtype=np.float32)}
    message = refused_beside_good(server.options.grpc_url, brought_models["scorer"], good, wrong, atol=0).message()
    assert "'features'" in message and "[-1,8]" in message and "[1,7]" in message, message


def door_json(inputs: dict[str, np.ndarray]) -> dict:
    return {"inputs": {name: array.tolist() for name, array in inputs.items()}}


@pytest.mark.parametrize("model", sorted(BROUGHT))
def test_the_door_serves_a_brought_model_on_its_route_by_tensor_name(model, door, brought_models):
    inputs = rows(model, 3, seed=5)
    answer = call(door, "POST", brought_models[model].door_route, json=door_json(inputs))
    assert answer.status == 200, answer.data[:500]
    outputs = answer.json()["outputs"]
    for name, value in direct(brought_models[model], inputs).items():
        np.testing.assert_allclose(np.array(outputs[name]).reshape(value.shape), value, rtol=RTOL, atol=ATOL)
    document = call(door, "GET", "/openapi.json").json()
    operation = document["paths"][brought_models[model].door_route]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert sorted(schema["properties"]["inputs"]["properties"]) == sorted(inputs)
    assert "$ref" not in json.dumps(schema), "the request schema stands alone in the document"


@pytest.mark.parametrize(
    "body, words",
    [
        ({"inputs": {"features": [[1.0, 2.0, 3.0]]}}, "at least 8 items"),
        ({"inputs": {"features": [[1.0] * 8, [1.0] * 7]}}, "at least 8 items"),
        ({"inputs": {"features": []}}, "at least 1 item"),
        ({"inputs": {"features": [["a"] * 8]}}, "valid number"),
        ({"inputs": {"features": [[1.0] * 8] * 65}}, "at most 64 items"),
        ({"inputs": {}}, "Field required"),
        ({"inputs": {"features": [[1.0] * 8], "extra": [1]}}, "Extra inputs"),
        ({"inputs": {"features": [[True] * 8]}}, "valid number"),
        ({"inputs": {"features": [[1e39] * 8]}}, "less than or equal to 3402823466"),
    ],
)
def test_bad_input_to_a_brought_model_fails_alone_with_a_clear_4xx(door, brought_models, body, words):
    good = [rows("scorer", 1, seed=300 + i) for i in range(8)]
    with ThreadPoolExecutor(9) as pool:
        answers = [pool.submit(call, door, "POST", "/v1/scorer", json=door_json(x)) for x in good]
        refused = pool.submit(call, door, "POST", "/v1/scorer", json=body).result()
        for x, answer in zip(good, answers):
            got = np.array(answer.result().json()["outputs"]["probs"])
            np.testing.assert_allclose(got, direct(brought_models["scorer"], x)["probs"], rtol=RTOL, atol=ATOL)
    problem = assert_problem(refused, 422, "invalid-request")
    assert words in json.dumps(problem), problem


@pytest.mark.parametrize(
    "body, kind, words",
    [
        ({"inputs": {"ids": [[1, 2]], "mask": [[1.0, 1.0], [1.0, 1.0]]}}, "invalid-input", "rows: ids 1, mask 2"),
        (
            {"inputs": {"ids": [[1, 2], [3]], "mask": [[1.0, 1.0]] * 2}},
            "invalid-input",
            "ids: lists of one axis differ in length",
        ),
        ({"inputs": {"ids": [[1, 2, 3]], "mask": [[1.0] * 4]}}, "invalid-input", "axis length: ids 3, mask 4"),
        ({"inputs": {"ids": [[1.5, 2]], "mask": [[1.0, 1.0]]}}, "invalid-request", ""),
        ({"inputs": {"ids": [["1", 2]], "mask": [[1.0, 1.0]]}}, "invalid-request", ""),
        ({"inputs": {"ids": [[2**63, 2]], "mask": [[1.0, 1.0]]}}, "invalid-request", ""),
    ],
)
def test_inputs_of_a_brought_model_are_held_to_their_types_and_rows(door, body, kind, words):
    problem = assert_problem(call(door, "POST", "/v1/pooler", json=body), 422, kind)
    assert words in problem["detail"], problem
    whole = call(door, "POST", "/v1/pooler", json={"inputs": {"ids": [[1.0, 2]], "mask": [[1.0, 0]]}})
    assert whole.status == 200 and whole.json()["outputs"]["count"] == [[1.0]], "JSON's 1.0 is a whole number"


@pytest.mark.parametrize("transport", ["grpc", "http", "door"])
def test_the_kit_s_generic_client_calls_a_brought_model_on_every_transport(transport, server, door, brought_models):
    url = {"grpc": server.options.grpc_url, "http": server.options.http_url, "door": door.url}[transport]
    client = ModelClient("pooler", OUTPUTS["pooler"], url, transport)
    try:
        inputs = rows("pooler", 3, seed=7)
        answer = client.infer(inputs)
    finally:
        client.close()
    for name, value in direct(brought_models["pooler"], inputs).items():
        np.testing.assert_allclose(answer[name].reshape(value.shape), value, rtol=RTOL, atol=ATOL)


def test_an_index_the_graph_refuses_fails_alone_as_bad_input_not_as_a_server_error(server, door, brought_models):
    """ONNX Runtime's INVALID_ARGUMENT (an id outside the embedding table) is the request's fault: INVALID_ARG from
    Triton, 422 from the door, while the requests beside it in the batch are answered."""
    good = [rows("pooler", 1, seed=400 + i) for i in range(12)]
    out_of_table = {"ids": np.array([[3, 12]], dtype=np.int64), "mask": np.ones((1, 2), dtype=np.float32)}
    refusal = refused_beside_good(server.options.grpc_url, brought_models["pooler"], good, out_of_table, atol=ATOL)
    assert refusal.status().endswith("INVALID_ARGUMENT") and "out of data bounds" in refusal.message()
    problem = assert_problem(call(door, "POST", "/v1/pooler", json=door_json(out_of_table)), 422, "invalid-input")
    assert "out of data bounds" in problem["detail"], problem


def test_a_graph_whose_rows_mix_is_served_unbatched_as_one_tensor(server, door, brought_models):
    """`kit add --max-batch-size 0`: no batch axis, no dynamic batching; a request's tensor is the graph's whole
    input, so its rows are centred on their own mean, through Triton and the door alike."""
    features = np.random.default_rng(8).standard_normal((5, 4)).astype(np.float32)
    want = direct(brought_models["centred"], {"features": features})["centred"]
    client = grpcclient.InferenceServerClient(server.options.grpc_url)
    try:
        assert client.get_model_config("centred").config.max_batch_size == 0
        tensor = grpcclient.InferInput("features", [5, 4], "FP32")
        tensor.set_data_from_numpy(features)
        np.testing.assert_allclose(client.infer("centred", [tensor]).as_numpy("centred"), want, rtol=RTOL, atol=ATOL)
    finally:
        client.close()
    answer = call(door, "POST", "/v1/centred", json={"inputs": {"features": features.tolist()}})
    assert answer.status == 200, answer.data[:300]
    np.testing.assert_allclose(np.array(answer.json()["outputs"]["centred"]), want, rtol=RTOL, atol=ATOL)
    short = call(door, "POST", "/v1/centred", json={"inputs": {"features": [[1.0, 2.0, 3.0]]}})
    assert_problem(short, 422, "invalid-request")
