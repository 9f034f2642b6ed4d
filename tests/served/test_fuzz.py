"""Fuzz both protocols with malformed requests (random bytes, wrong dtypes and shapes, invalid
UTF-8, lying lengths, oversized bodies, unknown models, tensors and paths, malformed protobufs):
every one must get a clear error (an HTTP error status with a message, a gRPC status with details),
no connection may drop, no process may die, and the server must answer right afterwards. One exception,
Triton's and measured: a request line longer than one 4 KiB read (the 5,000-byte paths) sometimes has its
connection closed unanswered, after some malformed bodies, while every valid request is answered (see
http_answer). Runs on a server of its own; `make fuzz` raises KIT_FUZZ_CASES from 300 to 5000 per protocol.

Not in here: a chunked HTTP body of a million chunks, which crashes Triton 2.51 (see test_faults)."""

from __future__ import annotations

import http.client
import json
import random
import struct
from collections import Counter

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from clients.radar import RadarClient
from kit.server.runtime import TritonServer
from tests.served.reliability import own_server, save_result, scale

CASES = int(scale("FUZZ_CASES", 300))
TEXT = "A sentence to classify. And a second one."
DTYPES = ["BYTES", "INT32", "INT64", "FP32", "FP16", "BOOL", "UINT8", "NOPE", ""]
SHAPES = [[1], [2], [0], [-1], [], [1, 1], [3, 1], [2**31], [2**62], [1, 2, 3]]
# Triton's HTTP server reads 4 KiB at a time. In some states (entered after some random bodies it fails to parse as
# JSON, left after other requests, a valid one among them) it closes the connection of a request line longer than
# that without an answer, on every retry; a line of 3,000 bytes, a valid request with a 5 KB header and /v2/health
# stay answered. The fuzz sequence met it in 3 of 20 runs of 5,000 cases (perf/RELIABILITY.md, "Fuzz").
READ_BYTES = 4096
DROPPED = "no answer (a request line over 4 KiB)"


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory, radar_artifacts):
    with own_server(tmp_path_factory.mktemp("fuzz")) as server:
        yield server


def json_body(rng: random.Random) -> tuple[str, dict]:
    """A well-formed body with one field made wrong."""
    tensor = {"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": [TEXT]}
    model = "radar"
    match rng.randrange(8):
        case 0:
            tensor["datatype"] = rng.choice(DTYPES[1:])
        case 1:
            tensor["shape"] = rng.choice(SHAPES[1:])
        case 2:
            tensor["data"] = rng.choice([[], [1.5], [None], [[TEXT]], [{"a": 1}], [TEXT] * 3, "x", None])
        case 3:
            tensor["name"] = rng.choice(["text", "", "TEXT\x00", "input_ids", "X" * 300])
        case 4:
            model = rng.choice(["nope", "radar/versions/7", "radar_classifierx", "..%2f..", "r" * 300])
        case 5:
            tensor["data"] = [rng.choice(["", "   ", "\ud800 lone surrogate", "x" * (2 * 1024 * 1024)])]
        case 6:
            model = "radar_classifier"
            tensor = {
                "name": rng.choice(["input_ids", "attention_mask"]),
                "datatype": rng.choice(DTYPES),
                "shape": rng.choice([[1, 600], [33, 8], [1, 0], [1], [1, 8]]),
                "data": [5] * 8,
            }
        case 7:
            return model, {"inputs": [tensor], "outputs": [{"name": rng.choice(["NOPE", "", "SCORE" * 50])}]}
    return model, {"inputs": [tensor]}


def http_case(rng: random.Random) -> tuple[str, str, dict, bytes]:
    """(method, path, headers, body) of one malformed HTTP request."""
    kind = rng.randrange(6)
    if kind == 0:  # random bytes
        return "POST", "/v2/models/radar/infer", {}, rng.randbytes(rng.randrange(0, 4096))
    if kind == 1:  # well-formed JSON, one field wrong
        model, body = json_body(rng)
        return "POST", f"/v2/models/{model}/infer", {}, json.dumps(body).encode()
    if kind == 2:  # valid JSON cut or damaged
        raw = bytearray(json.dumps({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": [TEXT]}]}).encode())
        for _ in range(rng.randrange(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return "POST", "/v2/models/radar/infer", {}, bytes(raw[: rng.randrange(1, len(raw) + 1)])
    if kind == 3:  # binary tensor extension with lying sizes or invalid UTF-8
        payload = rng.choice([b"\xff\xfe\xfd invalid", b"", TEXT.encode()])
        element = struct.pack("<I", rng.choice([len(payload), len(payload) + 100, 2**32 - 1, 0])) + payload
        header = json.dumps(
            {
                "inputs": [
                    {
                        "name": "TEXT",
                        "datatype": "BYTES",
                        "shape": [1],
                        "parameters": {"binary_data_size": rng.choice([len(element), len(element) + 7, 1, 0])},
                    }
                ]
            }
        ).encode()
        length = rng.choice([len(header), len(header) + 50, -1, 10**12, "abc"])
        return "POST", "/v2/models/radar/infer", {"Inference-Header-Content-Length": str(length)}, header + element
    if kind == 4:  # other methods, paths and admin endpoints with junk
        method = rng.choice(["GET", "PUT", "DELETE", "POST", "PATCH"])
        path = rng.choice(
            [
                "/v2/models/radar/infer",
                "/v2/repository/models/radar/load",
                "/v2/logging",
                "/v2/systemsharedmemory/region/x/register",
                "/v2/trace/setting",
                "/v2/../etc/passwd",
                "/v2/models/radar/versions/-1/infer",
                "/" + "a" * 5000,
                "/v2/models/%00/ready",
            ]
        )
        return method, path, {}, rng.randbytes(rng.randrange(0, 64))
    # oversized: a text over the 1 MiB limit in an otherwise valid request
    body = {
        "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": ["a" * ((1 << 20) + rng.randrange(1, 2 << 20))]}]
    }
    return "POST", "/v2/models/radar/infer", {}, json.dumps(body).encode()


def grpc_case(rng: random.Random) -> bytes:
    """A serialized ModelInferRequest that is malformed or asks for something invalid."""
    if rng.random() < 0.3:
        return rng.randbytes(rng.randrange(0, 2048))
    request = service_pb2.ModelInferRequest(model_name="radar")
    tensor = request.inputs.add(name="TEXT", datatype="BYTES", shape=[1])
    payload = rng.choice([TEXT.encode(), b"\xff\xfe invalid", b"", b" \n", b"a" * (1 << 20 | 1)])
    element = struct.pack("<I", len(payload)) + payload
    match rng.randrange(8):
        case 0:
            tensor.datatype = rng.choice(DTYPES[1:])
        case 1:
            del tensor.shape[:]
            tensor.shape.extend(rng.choice([[2], [0], [-1], [2**62], [1, 1, 1]]))
        case 2:
            element = struct.pack("<I", rng.choice([len(payload) + 1, 2**32 - 1, 2**31])) + payload
        case 3:
            element = element[: rng.randrange(0, 4)]
        case 4:
            request.model_name = rng.choice(["", "nope", "radar_classifier", "\x00", "r" * 1000])
            request.model_version = rng.choice(["", "2", "-1", "x"])
        case 5:
            tensor.name = rng.choice(["", "text", "input_ids"])
            request.outputs.add(name=rng.choice(["NOPE", ""]))
        case 6:
            tensor.contents.bytes_contents.append(payload)  # both contents and raw contents
        case 7:
            request.parameters["timeout"].string_param = "soon"
            request.parameters["priority"].int64_param = -(2**60)
    request.raw_input_contents.append(element)
    if rng.random() < 0.2:
        request.raw_input_contents.append(rng.randbytes(16))
    return request.SerializeToString()


def http_answer(server: TritonServer, method: str, path: str, headers: dict, body: bytes, attempts: int = 3):
    """The response and its body; None for a request line over READ_BYTES that got no answer (Triton's, above). A
    server that answers a large bad body early and closes can have its answer reset before the client has finished
    sending (a race of the transport, seen on busy cores): such a case is sent again, and fails only when it never
    gets an answer."""
    for attempt in range(attempts):
        connection = http.client.HTTPConnection("127.0.0.1", server.options.http_port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response, response.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
            if attempt == attempts - 1:
                if len(f"{method} {path} HTTP/1.1\r\n") > READ_BYTES:
                    return None
                # the case and the server's state, so that a run that hits this can be replayed
                log = server.log_path.read_text(errors="replace").splitlines()[-20:]
                raise AssertionError(
                    f"no answer to {method} {path} {headers} {body[:200]!r}: {exc!r}; server exit code "
                    f"{server.process.poll()}, its log ends:\n" + "\n".join(log)
                ) from exc
        finally:
            connection.close()


def test_malformed_http_requests_get_clear_errors(fuzzed):
    rng = random.Random(1)
    statuses, examples = Counter(), {}
    for _ in range(CASES):
        method, path, headers, body = http_case(rng)
        answered = http_answer(fuzzed, method, path, headers, body)
        if answered is None:
            statuses[DROPPED] += 1
            continue
        response, answer = answered
        statuses[str(response.status)] += 1
        if response.status >= 400:
            # 503 would tell clients to retry a request that can never succeed.
            assert response.status != 503, (method, path, body[:200], answer)
            assert answer.strip(), f"{response.status} without a message for {method} {path}"
            examples.setdefault(response.status, answer[:160].decode(errors="replace"))
    assert fuzzed.process.poll() is None and fuzzed.dead_stubs() == [] and fuzzed.is_ready()
    save_result(
        "fuzz_http",
        {
            "cases": CASES,
            "statuses": dict(sorted(statuses.items())),
            "examples": {str(k): v for k, v in sorted(examples.items())},
        },
    )


def test_malformed_grpc_requests_get_clear_errors(fuzzed):
    rng = random.Random(2)
    codes, examples = Counter(), {}
    with grpc.insecure_channel(fuzzed.options.grpc_url, options=[("grpc.max_send_message_length", -1)]) as channel:
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")  # bytes in, bytes out
        for _ in range(CASES):
            payload = grpc_case(rng)
            try:
                infer(payload, timeout=60)
                codes["OK"] += 1
            except grpc.RpcError as error:
                codes[error.code().name] += 1
                assert error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), error.details()
                assert error.details(), f"{error.code()} without details"
                examples.setdefault(error.code().name, error.details()[:160])
    assert fuzzed.process.poll() is None and fuzzed.dead_stubs() == [] and fuzzed.is_ready()
    save_result("fuzz_grpc", {"cases": CASES, "codes": dict(sorted(codes.items())), "examples": examples})


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_server_answers_right_after_the_fuzz(fuzzed, protocol, reference):
    url = fuzzed.options.grpc_url if protocol == "grpc" else fuzzed.options.http_url
    client = RadarClient(url, protocol)
    result = client.classify(TEXT)
    client.close()
    np.testing.assert_allclose(result.chunk_scores, [reference(TEXT[s:e]) for s, e in result.chunk_spans], atol=1e-4)
