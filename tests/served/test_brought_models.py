"""Models a user brings as ONNX graphs (`kit add NAME --task onnx --from FILE`, nothing else): served on the
real server beside the shipped models, their answers equal ONNX Runtime's on the same graph, batched across
requests, and a request of the wrong shape fails alone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from kit.control.specs import ModelSpec
from tests.served.conftest import BROUGHT

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


def direct(spec: ModelSpec, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(spec.source_path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def infer(url: str, protocol: str, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    lib = grpcclient if protocol == "grpc" else httpclient
    client = lib.InferenceServerClient(url)
    try:
        tensors = []
        for name, array in inputs.items():
            tensor = lib.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        result = client.infer(model, tensors)
        return {name: result.as_numpy(name) for name in OUTPUTS[model]}
    finally:
        client.close()


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


def executions(grpc_client, model: str) -> tuple[int, int]:
    stats = grpc_client.get_inference_statistics(model).model_stats[0]
    return stats.inference_stats.success.count, stats.execution_count


def test_concurrent_requests_of_a_brought_model_share_executions(grpc_client, server, brought_models):
    before = executions(grpc_client, "scorer")
    inputs = [rows("scorer", 1, seed=100 + i) for i in range(256)]
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda x: infer(server.options.grpc_url, "grpc", "scorer", x), inputs))
    requests, runs = (a - b for a, b in zip(executions(grpc_client, "scorer"), before))
    assert requests == 256
    assert runs < requests, f"{runs} executions for {requests} requests: Triton batched none of them"
    for x, answer in zip(inputs, answers):
        np.testing.assert_allclose(answer["probs"], direct(brought_models["scorer"], x)["probs"], rtol=RTOL, atol=ATOL)


def test_a_request_of_the_wrong_shape_fails_alone_with_a_clear_error(server, brought_models):
    url = server.options.grpc_url
    good = [rows("scorer", 1, seed=200 + i) for i in range(16)]
    wrong = {"features": np.zeros((1, 7), dtype=np.float32)}
    with ThreadPoolExecutor(17) as pool:
        answers = [pool.submit(infer, url, "grpc", "scorer", x) for x in good]
        refused = pool.submit(infer, url, "grpc", "scorer", wrong)
        with pytest.raises(InferenceServerException) as caught:
            refused.result()
        for x, answer in zip(good, answers):
            np.testing.assert_allclose(answer.result()["probs"], direct(brought_models["scorer"], x)["probs"], rtol=RTOL)
    message = caught.value.message()
    assert "'features'" in message and "[-1,8]" in message and "[1,7]" in message, message
