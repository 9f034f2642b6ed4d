"""A user's unbatched pipeline with settings (tests/pipelines/peaks.py, added by `kit add` alone, as the OCR entries
are specs of the same task): one request is one signal whole and its answer has its own size; served on the real
server it answers what the same module computes in this process, with the spec's threshold and the file it loads;
concurrent requests' network calls meet in the network's batcher; a bad signal fails alone; the door serves it."""

from __future__ import annotations

import asyncio
import queue
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from kit.adapters.custom_pipeline import in_process_networks
from kit.control.pipeline_task import ready_pipeline
from kit.control.specs import ModelSpec
from kit.pipelines.custom import answer
from tests.served.doors import assert_problem, call
from tests.served.statistics import counted, executions
from tests.served.tensors import infer

RTOL, ATOL = 1e-5, 1e-6
OUTPUTS = ["positions", "scores"]
THRESHOLD = 2.0  # the spec's, as conftest adds it


def signal(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(0.0, 4.0, int(rng.integers(3, 40))).astype(np.float32)


def in_process(spec: ModelSpec, values: np.ndarray) -> dict[str, np.ndarray]:
    pipeline = ready_pipeline(spec)
    return asyncio.run(answer(pipeline, {"signal": values}, in_process_networks(pipeline, spec.source_path.parent), False))


def all_at_once(url: str, signals: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Every signal sent at once from one client, so that the entry has requests waiting and runs several together."""
    client = grpcclient.InferenceServerClient(url)
    done: queue.Queue = queue.Queue()
    try:
        for index, values in enumerate(signals):
            tensor = grpcclient.InferInput("signal", list(values.shape), "FP32")
            tensor.set_data_from_numpy(values)
            client.async_infer("peaks", [tensor], partial(lambda i, result, error: done.put((i, result, error)), index))
        results = [done.get(timeout=60) for _ in signals]
    finally:
        client.close()
    assert all(error is None for _, _, error in results), [error for _, _, error in results if error][:1]
    return [{name: result.as_numpy(name) for name in OUTPUTS} for _, result, _ in sorted(results, key=lambda r: r[0])]


def test_an_unbatched_pipeline_answers_each_signal_as_its_module_does(server, brought_models, grpc_client):
    spec = brought_models["peaks"]
    signals = [signal(seed) for seed in range(128)]
    before = executions(grpc_client, "peaks_scorer")
    served = all_at_once(server.options.grpc_url, signals)
    calls, runs = counted(grpc_client, {"peaks_scorer": before}, {})["peaks_scorer"]
    for values, got in zip(signals, served):
        want = in_process(spec, values)
        assert got["positions"].tolist() == np.flatnonzero(values > THRESHOLD).tolist() == want["positions"].tolist()
        np.testing.assert_allclose(got["scores"], want["scores"], rtol=RTOL, atol=ATOL)
    assert calls > 0 and runs < calls, f"{runs} scorer executions for {calls} calls: the calls never met"


def test_a_bad_signal_fails_alone_among_good_ones(server, brought_models):
    url = server.options.grpc_url
    good = [signal(300 + i) for i in range(12)]
    bad = np.array([1.0, np.nan, 3.0], np.float32)
    with ThreadPoolExecutor(len(good) + 1) as pool:
        answers = [pool.submit(infer, url, "grpc", "peaks", {"signal": s}, OUTPUTS) for s in good]
        refused = pool.submit(infer, url, "grpc", "peaks", {"signal": bad}, OUTPUTS)
        with pytest.raises(InferenceServerException) as caught:
            refused.result()
        for values, got in zip(good, answers):
            np.testing.assert_allclose(got.result()["scores"], in_process(brought_models["peaks"], values)["scores"], rtol=RTOL)
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT" and "signal holds NaN" in caught.value.message()


def test_the_door_serves_the_unbatched_pipeline_whole(door, brought_models):
    spec = brought_models["peaks"]
    values = signal(7)
    reply = call(door, "POST", spec.door_route, json={"inputs": {"signal": values.tolist()}})
    assert reply.status == 200, reply.data[:500]
    want = in_process(spec, values)
    assert reply.json()["outputs"]["positions"] == want["positions"].tolist()
    np.testing.assert_allclose(np.array(reply.json()["outputs"]["scores"]).reshape(-1, 4), want["scores"], rtol=RTOL)
    quiet = call(door, "POST", spec.door_route, json={"inputs": {"signal": [0.0]}})  # no peaks: an answer of size 0
    assert quiet.status == 200 and quiet.json()["outputs"] == {"positions": [], "scores": []}, quiet.data[:300]
    problem = assert_problem(call(door, "POST", spec.door_route, json={"inputs": {"signal": [1.0, "x"]}}), 422, "invalid-request")
    assert problem["status"] == 422
