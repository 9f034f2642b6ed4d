"""A real tritonserver for the whole session, on free ports, with the CPU repository built fresh."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tokenizers import Tokenizer

from kit.control.repository import build
from kit.control.runtime import ServerOptions, TritonServer
from tests.conftest import ARTIFACTS


@pytest.fixture(scope="session")
def server(tmp_path_factory, radar_artifacts):
    root = tmp_path_factory.mktemp("triton")
    repository = root / "repository"
    build("cpu", repository, ARTIFACTS)
    options = ServerOptions.on_free_ports(repository)
    with TritonServer(options, log_path=root / "server.log") as running:
        yield running


@pytest.fixture(scope="session")
def repository(server) -> Path:
    return server.options.repository


@pytest.fixture(params=["grpc", "http"])
def protocol(request) -> str:
    return request.param


@pytest.fixture
def url(server, protocol) -> str:
    return server.options.grpc_url if protocol == "grpc" else server.options.http_url


@pytest.fixture(scope="session")
def grpc_client(server):
    client = grpcclient.InferenceServerClient(server.options.grpc_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def http_client(server):
    client = httpclient.InferenceServerClient(server.options.http_url, concurrency=8)
    yield client
    client.close()


@pytest.fixture(scope="session")
def reference(radar_artifacts):
    """Direct ONNX Runtime inference, one chunk at a time and unpadded: no bucketing, no batching."""
    meta = json.loads((radar_artifacts / "export.json").read_text())
    tokenizer = Tokenizer.from_file(str(radar_artifacts / "tokenizer.json"))
    session = ort.InferenceSession(str(radar_artifacts / "model.onnx"), providers=["CPUExecutionProvider"])
    index = meta["ai_label_index"]

    def score(chunk: str) -> float:
        ids = np.array([tokenizer.encode(chunk).ids], dtype=np.int64)
        (logits,) = session.run(["logits"], {"input_ids": ids, "attention_mask": np.ones_like(ids)})
        exp = np.exp(logits[0] - logits[0].max())
        return float(exp[index] / exp.sum())

    score.tokenizer = tokenizer
    score.max_tokens = meta["max_tokens"]
    score.atol = meta["atol"]
    return score
