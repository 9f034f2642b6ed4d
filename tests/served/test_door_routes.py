"""The front door on the session's real server: every route answers what Triton answers for the same
input, the limits refuse with the right 4xx before anything reaches Triton, API keys are needed when
given, and the door's health, ids and metrics tell the truth. `running_door` starts `python -m door`
on a free port, as `make serve` does."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import psutil
import pytest

from clients.door import DoorClient, DoorError
from clients.health_code import HealthCodeClient
from clients.ocr import OcrClient
from clients.radar import AsyncRadarClient, RadarClient
from samples.images import document, health_code
from samples.texts import sample_texts
from tests.conftest import REPO_ROOT
from tests.served.doors import Door, assert_problem, call, logged, running_door


def handled(grpc_client, model: str) -> int:
    """Requests the model has answered, successfully or not, by Triton's own statistics."""
    stats = grpc_client.get_inference_statistics(model).model_stats[0].inference_stats
    return stats.success.count + stats.fail.count


@pytest.fixture(scope="module")
def guarded(server, tmp_path_factory):
    """A door with API keys and a short body deadline, both set by its environment alone."""
    log = tmp_path_factory.mktemp("guarded") / "door.log"
    with running_door(server.options.grpc_url, log, env={"DOOR_API_KEYS": "k1,k2", "DOOR_BODY_TIMEOUT": "1"}) as running:
        yield running


def test_radar_answers_equal_tritons_for_one_text_and_several(door, server):
    texts = sample_texts(3, 150, 900, seed=51)
    direct = RadarClient(server.options.grpc_url)
    expected = [direct.classify(text) for text in texts]
    direct.close()
    client = DoorClient(door.url)
    for got, want in zip([client.classify(texts[0]), *client.classify_many(texts)], [expected[0], *expected]):
        assert got.chunk_spans == want.chunk_spans
        np.testing.assert_allclose(got.chunk_scores, want.chunk_scores, atol=1e-5, rtol=0)
        assert got.score == pytest.approx(want.score, abs=1e-5)


def test_ocr_answers_equal_tritons_by_upload_and_by_base64(door, server):
    image = document(61, width=640, lines=3).data
    direct = OcrClient(server.options.grpc_url)
    expected = direct.read(image)
    direct.close()
    by_form = call(door, "POST", "/v1/ocr", fields={"image": ("scan.png", image, "image/png")}).json()["lines"]
    by_json = DoorClient(door.url).read(image)
    assert [line["text"] for line in by_form] == [line.text for line in by_json] == [line.text for line in expected]
    np.testing.assert_allclose([line["box"] for line in by_form], [line.box for line in expected], atol=1e-3)
    np.testing.assert_allclose([line.score for line in by_json], [line.score for line in expected], atol=1e-4)


def test_health_code_answer_equals_tritons(door, server):
    shot = health_code(62, "yellow")
    direct = HealthCodeClient(server.options.grpc_url)
    expected = direct.read(shot.data)
    direct.close()
    assert DoorClient(door.url).health_code(shot.data) == expected
    assert call(door, "POST", "/v1/health-code", fields={"image": ("code.png", shot.data)}).json() == expected
    assert expected["color"] == "yellow"


def both_ways(make, method: str, items: list, door: Door, server) -> list[tuple]:
    """(direct answer, answer through the door) per item, by the same client class and call."""
    direct, through = make(server.options.grpc_url, "grpc"), make(door.url, "door")
    try:
        return list(zip(getattr(direct, method)(items), getattr(through, method)(items), strict=True))
    finally:
        direct.close()
        through.close()


def test_the_model_clients_give_the_same_results_through_the_door(door, server):
    """RadarClient, OcrClient and HealthCodeClient with protocol "door": the same calls give the same
    results, and a refused item yields its error in place while the others are answered."""
    texts = sample_texts(3, 150, 900, seed=52)
    for want, got in both_ways(RadarClient, "classify_many", texts, door, server):
        assert got.chunk_spans == want.chunk_spans
        np.testing.assert_allclose(got.chunk_scores, want.chunk_scores, atol=1e-5, rtol=0)
    images = [document(64, width=640, lines=2).data, b"not an image", health_code(65, "red").data]
    (want, got), (refused_direct, refused) = both_ways(OcrClient, "read_many", images[:2], door, server)
    assert [line.text for line in got] == [line.text for line in want] and want
    np.testing.assert_allclose([line.box for line in got], [line.box for line in want], atol=1e-3)
    assert isinstance(refused_direct, Exception) and isinstance(refused, DoorError) and refused.status == 415
    (refused_direct, refused), (want, got) = both_ways(HealthCodeClient, "read_many", images[1:], door, server)
    assert got == want and want["color"] == "red"
    assert isinstance(refused, DoorError) and refused.status == 415
    result = subprocess.run(
        [sys.executable, "-m", "clients.radar", "--protocol", "door", "--url", door.url, "--json", "/dev/stdin"],
        input=texts[0],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert [(c["start"], c["end"]) for c in answer["chunks"]] == both_ways(RadarClient, "classify_many", texts[:1], door, server)[
        0
    ][0].chunk_spans


def test_resnet_answer_equals_tritons_as_float32_bytes_and_as_json(door, grpc_client):
    import tritonclient.grpc as grpcclient

    image = np.random.default_rng(63).standard_normal((3, 40, 52), dtype=np.float32)
    tensor = grpcclient.InferInput("INPUT", [1, 3, 40, 52], "FP32")
    tensor.set_data_from_numpy(image[np.newaxis])
    expected = grpc_client.infer("resnet50", [tensor]).as_numpy("PROBS")[0]
    client = DoorClient(door.url)
    by_bytes, by_json = client.resnet50(image), client.resnet50(image, binary=False)
    np.testing.assert_allclose(by_bytes, expected, rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(by_bytes, by_json)  # the same tensor reaches Triton either way


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims `width` x `height` and holds no pixel: only a header parser accepts it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + chunk(b"IEND", b"")


def test_limits_refuse_with_a_clear_4xx_before_anything_reaches_triton(door, grpc_client):
    before = {model: handled(grpc_client, model) for model in ("radar", "ocr", "resnet50")}
    big_text = "a" * ((1 << 20) + 1)
    assert_problem(call(door, "POST", "/v1/radar", json={"text": big_text}), 413, "text-too-large")
    assert_problem(call(door, "POST", "/v1/radar", json={"texts": ["a"] * 65}), 422, "invalid-request")
    declared = call(
        door, "POST", "/v1/radar", body=b"{}", headers={"Content-Type": "application/json", "Content-Length": "999999999"}
    )
    assert_problem(declared, 413, "body-too-large")
    bomb = base64.b64encode(png_header(20000, 20000)).decode()
    assert "pixels" in assert_problem(call(door, "POST", "/v1/ocr", json={"image": bomb}), 413, "image-too-large")["detail"]
    assert_problem(call(door, "POST", "/v1/ocr", fields={"image": ("x.txt", b"plain text, no image")}), 415, "unsupported-image")
    assert_problem(call(door, "POST", "/v1/resnet50", json={"shape": [3, 2000, 2000], "data": "A" * 16}), 413, "image-too-large")
    raw = {"Content-Type": "application/octet-stream"}
    pixels = bytes(4 * 3 * 8 * 8)
    for query, status, kind in [
        ("?shape=3,8,9", 400, "malformed-body"),  # the bytes of an 8 x 8 image, a shape of 8 x 9
        ("?shape=3,8", 422, "invalid-request"),
        ("", 422, "invalid-request"),
        ("?shape=3,2000,2000", 413, "image-too-large"),
    ]:
        assert_problem(call(door, "POST", f"/v1/resnet50{query}", body=pixels, headers=raw), status, kind)
    assert_problem(
        call(door, "POST", "/v1/radar", body=b"text=hello", headers={"Content-Type": "text/plain"}), 415, "unsupported-media-type"
    )
    assert {model: handled(grpc_client, model) for model in before} == before


def answer_on(sock: socket.socket) -> tuple[int, dict]:
    """The status and problem body of the HTTP answer on `sock`."""
    sock.settimeout(30)
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, json.loads(response.read())


def chunked_until_refused(door: Door, chunk: bytes, total: int) -> tuple[int, dict]:
    """POST /v1/radar as a chunked body of `total` bytes; the door's answer, even if it came mid-body."""
    with socket.create_connection(("127.0.0.1", door.port)) as sock:
        sock.sendall(
            b"POST /v1/radar HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        body = (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") * (total // len(chunk)) + b"0\r\n\r\n"
        with contextlib.suppress(ConnectionError):
            for start in range(0, len(body), 1 << 20):
                sock.sendall(body[start : start + (1 << 20)])
        return answer_on(sock)


def test_a_chunked_body_over_the_cap_is_refused_as_it_arrives(door):
    status, problem = chunked_until_refused(door, b" " * (1 << 20), 16 << 20)
    assert (status, problem["type"]) == (413, "urn:triton-kit:problem:body-too-large"), problem


def test_a_slow_drip_body_is_refused_at_the_deadline(guarded):
    with socket.create_connection(("127.0.0.1", guarded.port)) as sock:
        sock.sendall(b"POST /v1/radar HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        start = time.monotonic()
        with contextlib.suppress(ConnectionError):
            for byte in b'"text": "drip':
                time.sleep(0.2)
                sock.sendall(bytes([byte]))
        status, problem = answer_on(sock)
    assert (status, problem["type"]) == (408, "urn:triton-kit:problem:body-timeout"), problem
    assert time.monotonic() - start < 5


def test_api_keys_are_needed_when_the_door_has_some(guarded):
    body = assert_problem(call(guarded, "POST", "/v1/radar", json={"text": "A text."}), 401, "missing-api-key")
    assert "X-API-Key" in body["detail"]
    with pytest.raises(DoorError) as refused:
        DoorClient(guarded.url, api_key="wrong").classify("A text.")
    assert refused.value.status == 401
    client = DoorClient(guarded.url, api_key="k2")
    assert client.classify("A text.").chunk_spans == [(0, 7)] and client.retries.count == 0


def test_the_model_clients_carry_the_key_sync_async_and_on_their_command_lines(guarded):
    with pytest.raises(DoorError) as refused:
        RadarClient(guarded.url, "door").classify("A text.")
    assert refused.value.status == 401
    assert RadarClient(guarded.url, "door", api_key="k1").classify("A text.").chunk_spans == [(0, 7)]

    async def through_async() -> list:
        client = AsyncRadarClient(guarded.url, "door", api_key="k2")
        try:
            return await client.classify_many(["A text.", "Another text."], concurrency=2)
        finally:
            await client.close()

    assert [result.chunk_spans for result in asyncio.run(through_async())] == [[(0, 7)], [(0, 13)]]
    command = [sys.executable, "-m", "clients.radar", "--protocol", "door", "--url", guarded.url, "--json", "/dev/stdin"]
    for extra, env in (([], {"DOOR_API_KEY": "k1"}), (["--api-key", "k2"], {})):
        result = subprocess.run(
            command + extra, input="A text.", capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, env={**os.environ, **env}
        )
        assert result.returncode == 0 and json.loads(result.stdout)["chunks"][0]["end"] == 7, result.stderr


def test_readiness_ids_and_metrics(door, brought_models):
    ready = call(door, "GET", "/health/ready")
    assert ready.status == 200, ready.data
    body = ready.json()
    canary = body.pop("canary")  # the served-numerics canary's last verdict (tests/served/test_canary.py)
    assert body == {
        "ready": True,
        "triton": True,
        "models": {
            **{model: True for model in ("radar", "ocr", "health_code", "resnet50")},
            **{model: True for model in brought_models},  # the users' specs, each by its entry
        },
        "dead_stubs": [],
        "stubs_visible": True,
    }
    assert canary["ok"] and canary["max_drift"] <= canary["tolerance"], canary
    answer = call(door, "POST", "/v1/radar", json={"text": "One more text."}, headers={"X-Request-ID": "door-test-1"})
    assert answer.headers["x-request-id"] == "door-test-1"
    assert logged(door, "id=door-test-1"), door.log.read_text()[-2000:]
    metrics = call(door, "GET", "/metrics").data.decode()
    assert 'door_requests_total{method="POST",route="/v1/radar",status="200"}' in metrics
    assert call(door, "GET", "/docs").status == 200
    assert "/v1/health-code" in call(door, "GET", "/openapi.json").json()["paths"]


def test_a_door_of_two_workers_answers_as_triton_does_and_its_metrics_add_up(server, tmp_path):
    texts = sample_texts(12, 150, 600, seed=57)
    direct = RadarClient(server.options.grpc_url)
    expected = [direct.classify(text).score for text in texts]
    direct.close()
    with running_door(server.options.grpc_url, tmp_path / "door.log", "--workers", "2") as door:
        workers = [p for p in psutil.Process(door.process.pid).children() if "--multiprocessing-fork" in p.cmdline()]
        assert len(workers) == 2, [p.cmdline() for p in workers]

        def fresh(method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
            """On a new connection each time, so that the kernel hands the requests to either worker."""
            connection = http.client.HTTPConnection("127.0.0.1", door.port, timeout=60)
            try:
                payload = json.dumps(body).encode() if body is not None else None
                connection.request(method, path, payload, {"Content-Type": "application/json"} if body else {})
                answer = connection.getresponse()
                return answer.status, answer.read()
            finally:
                connection.close()

        def samples() -> dict[str, float]:
            rows = fresh("GET", "/metrics")[1].decode().splitlines()
            return {name: float(value) for name, value in (row.rsplit(" ", 1) for row in rows if row and row[0] != "#")}

        # The door answers once one worker is up; the other may still run its first canary (a request in flight to
        # Triton) until its own startup completes: both have when two canary runs are counted.
        deadline = time.monotonic() + 60
        while samples().get('door_canary_runs_total{result="ok"}', 0) < 2:
            assert time.monotonic() < deadline, "the second worker did not start within 60 s"
            time.sleep(0.2)
        for text, score in zip(texts, expected):
            status, body = fresh("POST", "/v1/radar", {"text": text})
            assert status == 200, body[:300]
            assert json.loads(body)["score"] == pytest.approx(score, abs=1e-5)
        served = 'door_requests_total{method="POST",route="/v1/radar",status="200"}'
        for _ in range(6):  # whichever worker answers the scrape, it reports the door's total
            now = samples()
            assert now[served] == len(texts), now
            assert now["door_requests_in_flight"] == 1.0, "the scrape itself, in whichever worker took it"
            assert now['door_triton_in_flight{model="radar"}'] == 0.0
            assert now["door_canary_ok"] == 1.0 and now['door_canary_runs_total{result="ok"}'] >= 2, "one run per worker"
    assert door.process.returncode is not None
