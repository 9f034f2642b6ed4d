"""Every model client shares one base and its overload retry policy, on every transport: checked against a
stand-in for Triton's HTTP endpoint on 127.0.0.1 that answers with scripted statuses, so no server is needed."""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tritonclient.utils import InferenceServerException

from clients.base import AsyncModelClient, ModelClient
from clients.health_code import HealthCodeClient
from clients.ocr import OcrClient, OcrLine
from clients.radar import AsyncRadarClient, RadarClient, RadarResult
from clients.triton import NO_RETRY, RetryPolicy

FAST = RetryPolicy(attempts=3, base=0.001, cap=0.002)
OVERLOADED = (503, {"error": "Exceeds maximum queue size"})
BAD_INPUT = (400, {"error": "unable to decode IMAGE"})
BOX = [[1.0, 2.0], [30.0, 2.0], [30.0, 9.0], [1.0, 9.0]]
OCR_ANSWER = (
    200,
    {
        "model_name": "ocr",
        "outputs": [
            {"name": "TEXTS", "datatype": "BYTES", "shape": [1], "data": ["健康码 green"]},
            {"name": "SCORES", "datatype": "FP32", "shape": [1], "data": [0.5]},
            {"name": "BOXES", "datatype": "FP32", "shape": [1, 4, 2], "data": [v for corner in BOX for v in corner]},
        ],
    },
)
HEALTH_CODE = {"color": "green", "qr": None, "texts": ["绿码"], "fields": {"name": "张*", "datetime": None, "status": None}}
HEALTH_CODE_ANSWER = (
    200,
    {
        "model_name": "health_code",
        "outputs": [
            {"name": "RESULT", "datatype": "BYTES", "shape": [1], "data": [json.dumps(HEALTH_CODE, ensure_ascii=False)]},
        ],
    },
)
RADAR_ANSWER = (
    200,
    {
        "model_name": "radar",
        "outputs": [
            {"name": "SCORE", "datatype": "FP32", "shape": [1], "data": [0.75]},
            {"name": "CHUNK_SCORES", "datatype": "FP32", "shape": [2], "data": [0.5, 1.0]},
            {"name": "CHUNK_SPANS", "datatype": "INT64", "shape": [2, 2], "data": [0, 4, 4, 9]},
        ],
    },
)
IMAGE = b"\x89PNG\r\n\x1a\n not really an image"


class StandIn(ThreadingHTTPServer):
    """Answers each POST with the next scripted (status, JSON body) and records (path, body) of every request."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"127.0.0.1:{self.server_address[1]}"
        self.answers: list[tuple[int, dict]] = []
        self.requests: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()

    def next_answer(self, path: str, body: bytes) -> tuple[int, dict]:
        with self.lock:
            self.requests.append((path, body))
            return self.answers.pop(0) if self.answers else (500, {"error": "more requests than the test scripted"})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Triton does: tritonclient's HTTP clients reuse connections

    def do_POST(self):
        status, document = self.server.next_answer(self.path, self.rfile.read(int(self.headers["Content-Length"])))
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def triton():
    server = StandIn()
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def sent_images(server: StandIn) -> list[bytes]:
    """The IMAGE of each REST JSON request, decoded from its base64 text."""
    images = []
    for _, body in server.requests:
        (image,) = [i for i in json.loads(body)["inputs"] if i["name"] == "IMAGE"]
        assert image["datatype"] == "BYTES" and image["shape"] == [1]
        images.append(base64.b64decode(image["data"][0], validate=True))
    return images


@pytest.mark.parametrize(
    "client_class, base",
    [
        (RadarClient, ModelClient),
        (OcrClient, ModelClient),
        (HealthCodeClient, ModelClient),
        (AsyncRadarClient, AsyncModelClient),
    ],
)
def test_every_client_shares_the_base_and_its_default_retry_policy(client_class, base):
    assert issubclass(client_class, base)
    assert not {"infer", "map", "close"} & set(vars(client_class)), "models only turn inputs and outputs into tensors"
    default = inspect.signature(base).parameters["retry"].default
    assert default == RetryPolicy() and default.attempts > NO_RETRY.attempts
    assert inspect.signature(client_class).parameters["retry"].default == default


@pytest.mark.parametrize("client_class", [RadarClient, OcrClient, HealthCodeClient])
def test_a_constructed_client_retries_by_default(client_class):
    client = client_class("127.0.0.1:1", "http")
    try:
        assert client.retry == RetryPolicy() and client.retries.count == 0
    finally:
        client.close()


@pytest.mark.parametrize(
    "client_class, answer, expected",
    [
        (OcrClient, OCR_ANSWER, [OcrLine("健康码 green", 0.5, BOX)]),
        (HealthCodeClient, HEALTH_CODE_ANSWER, HEALTH_CODE),
    ],
)
def test_base64_json_retries_overload_then_answers_and_counts_the_retry(triton, client_class, answer, expected):
    triton.answers = [OVERLOADED, answer]
    client = client_class(triton.url, "http", base64_json=True, retry=FAST)
    assert client.read(IMAGE) == expected
    assert client.retries.count == 1
    model = "ocr" if client_class is OcrClient else "health_code"
    assert [path for path, _ in triton.requests] == [f"/v2/models/{model}/infer"] * 2
    assert sent_images(triton) == [IMAGE, IMAGE]


@pytest.mark.parametrize("client_class", [OcrClient, HealthCodeClient])
def test_base64_json_raises_bad_input_at_once(triton, client_class):
    triton.answers = [BAD_INPUT, OCR_ANSWER]
    client = client_class(triton.url, "http", base64_json=True, retry=FAST)
    with pytest.raises(InferenceServerException) as raised:
        client.read(IMAGE)
    assert raised.value.status() == "400" and "unable to decode IMAGE" in raised.value.message()
    assert client.retries.count == 0 and len(triton.requests) == 1


def test_base64_json_gives_up_after_its_attempts_with_the_last_error(triton):
    triton.answers = [OVERLOADED] * FAST.attempts + [OCR_ANSWER]
    client = OcrClient(triton.url, "http", base64_json=True, retry=FAST)
    with pytest.raises(InferenceServerException) as raised:
        client.read(IMAGE)
    assert raised.value.status() == "503"
    assert client.retries.count == FAST.attempts - 1 and len(triton.requests) == FAST.attempts


def test_base64_json_retries_a_refused_connection():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"127.0.0.1:{probe.getsockname()[1]}"  # closed when the block ends: nothing listens there
    client = HealthCodeClient(url, "http", base64_json=True, retry=FAST)
    with pytest.raises(ConnectionError):
        client.read(IMAGE)
    assert client.retries.count == FAST.attempts - 1


def test_read_many_puts_a_refused_image_in_its_place(triton):
    triton.answers = [BAD_INPUT, OVERLOADED, OCR_ANSWER]
    client = OcrClient(triton.url, "http", concurrency=1, base64_json=True, retry=FAST)
    refused, lines = client.read_many([b"broken", IMAGE])
    assert isinstance(refused, InferenceServerException) and refused.status() == "400"
    assert lines == [OcrLine("健康码 green", 0.5, BOX)]
    assert client.retries.count == 1 and sent_images(triton) == [b"broken", IMAGE, IMAGE]


RADAR_RESULT = RadarResult(score=0.75, chunk_scores=[0.5, 1.0], chunk_spans=[(0, 4), (4, 9)])


def test_tritonclient_http_retries_under_the_same_policy(triton):
    triton.answers = [OVERLOADED, RADAR_ANSWER, BAD_INPUT]
    client = RadarClient(triton.url, "http", retry=FAST)
    try:
        assert client.classify("some text") == RADAR_RESULT
        with pytest.raises(InferenceServerException) as raised:
            client.classify("more text")
    finally:
        client.close()
    assert raised.value.status() == "400"
    assert client.retries.count == 1 and len(triton.requests) == 3


def test_async_client_retries_under_the_same_policy(triton):
    triton.answers = [OVERLOADED, RADAR_ANSWER, BAD_INPUT]

    async def run():
        client = AsyncRadarClient(triton.url, "http", retry=FAST)
        try:
            assert client.retries.count == 0
            return client, await client.classify_many(["some text", "more text"], concurrency=1)
        finally:
            await client.close()

    client, (result, refused) = asyncio.run(run())
    assert result == RADAR_RESULT
    assert isinstance(refused, InferenceServerException) and refused.status() == "400"
    assert client.retries.count == 1 and len(triton.requests) == 3
