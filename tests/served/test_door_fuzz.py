"""Fuzz the front door with malformed requests (random bytes, wrong types and shapes, invalid UTF-8 and
base64, broken forms and images, lying lengths, unknown paths and methods): every one gets a clear 4xx
with a problem body, no connection drops, and the door and Triton answer right afterwards. Runs on the
session's server; `make fuzz`-style runs raise KIT_DOOR_FUZZ_CASES."""

from __future__ import annotations

import base64
import json
import random
import socket
from collections import Counter

import numpy as np

from clients.door import DoorClient
from samples.images import document
from tests.served.reliability import save_result, scale
from tests.served.test_door_routes import answer_on

CASES = int(scale("DOOR_FUZZ_CASES", 200))
ROUTES = ["/v1/radar", "/v1/ocr", "/v1/health-code", "/v1/resnet50"]


def json_case(rng: random.Random, image: bytes) -> tuple[str, dict, bytes]:
    """A JSON body to one route with one thing wrong."""
    route = rng.choice(ROUTES)
    match route, rng.randrange(4):
        case "/v1/radar", 0:
            body = {"text": rng.choice([None, 0, 1.5, 2**64, [], {}, True, "\ud800"])}
        case "/v1/radar", 1:
            body = {"texts": rng.choice([[], ["a"] * 65, [1, 2], "not a list", [None]])}
        case "/v1/radar", _:
            body = rng.choice([{}, {"text": "a", "texts": ["b"]}, {"txt": "a"}, {"text": "a", "extra": 1}, [], "text"])
        case "/v1/resnet50", 0:
            body = {
                "shape": rng.choice([[3], [3, 4], [3, 0, 4], [3, -1, 4], [1, 4, 4], [3, 4, 4, 4], ["3", 4, 4], None]),
                "data": "",
            }
        case "/v1/resnet50", 1:
            data = np.full(3 * 4 * 4, rng.choice([np.nan, np.inf, -np.inf]), dtype="<f4")
            body = {"shape": [3, 4, 4], "data": base64.b64encode(data.tobytes()).decode()}
        case "/v1/resnet50", _:
            body = {"shape": [3, 4, 4], "data": rng.choice(["AAAA", "not base64!", "A" * 7, 12, None])}
        case _, 0:
            body = {"image": rng.choice(["", "!!!", "data:image/png;base64,", base64.b64encode(rng.randbytes(64)).decode()])}
        case _, 1:
            cut = base64.b64encode(image[: rng.randrange(60, len(image) // 2)]).decode()  # a header, then nothing
            body = {"image": cut}
        case _, _:
            body = rng.choice([{"img": "x"}, {"image": 5}, {"image": None}, [], {"image": "x", "more": 1}])
    return route, {"Content-Type": "application/json"}, json.dumps(body).encode()


def case(rng: random.Random, image: bytes) -> tuple[str, str, dict, bytes]:
    kind = rng.randrange(6)
    if kind <= 1:
        return ("POST", *json_case(rng, image))
    route = rng.choice(ROUTES)
    if kind == 2:  # bytes that are not what the Content-Type says
        kind_of = rng.choice(
            ["application/json", "multipart/form-data; boundary=xyz", "text/plain", "", "application/x-www-form-urlencoded"]
        )
        return "POST", route, {"Content-Type": kind_of} if kind_of else {}, rng.randbytes(rng.randrange(0, 2048))
    if kind == 3:  # forms that are broken or hold the wrong things
        boundary = "b0undary"
        part = rng.choice(
            [
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\n'.encode()
                + image
                + b"\r\n",
                f'--{boundary}\r\nContent-Disposition: form-data; name="image"\r\n\r\nnot a file\r\n'.encode(),
                f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="a"\r\n\r\n'.encode()
                + rng.randbytes(99),
                b"--wrong\r\n\r\n",
            ]
        )
        body = part + f"--{boundary}--\r\n".encode() * rng.randrange(2)
        return "POST", rng.choice(ROUTES[1:3]), {"Content-Type": f"multipart/form-data; boundary={boundary}"}, body
    if kind == 4:  # JSON that is not JSON
        body = rng.choice([b'{"text": "\xff\xfe"}', b'{"text": ', b"[" * 100_000, b'{"text": "a"}' * 3, b"\x00" * 10])
        return "POST", route, {"Content-Type": "application/json"}, body
    method = rng.choice(["GET", "PUT", "DELETE", "PATCH", "POST"])
    path = rng.choice(["/v2/models/radar/infer", "/v1/radar/", "/v1/nope", "/" + "a" * 3000, "/v1/%00", "/static/../app.py"])
    return (
        method,
        path if method != "GET" or not path.startswith("/v1/r") else "/v1/radar",
        {},
        rng.randbytes(rng.randrange(0, 64)),
    )


def send(port: int, method: str, path: str, headers: dict, body: bytes) -> tuple[int, dict]:
    head = [f"{method} {path} HTTP/1.1", "Host: door", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        return answer_on(sock)


def test_malformed_requests_get_only_clear_4xx_and_nothing_breaks(door, server):
    rng = random.Random(2026)
    image = document(91, width=640, lines=2).data
    statuses, kinds = Counter(), Counter()
    for _ in range(CASES):
        method, path, headers, body = case(rng, image)
        status, problem = send(door.port, method, path, headers, body)
        assert 400 <= status < 500, (method, path[:80], headers, body[:200], problem)
        assert problem["status"] == status and problem["detail"] and problem["title"], problem
        statuses[status] += 1
        kinds[problem["type"].rsplit(":", 1)[-1]] += 1
    assert door.process.poll() is None and server.process.poll() is None and server.is_ready()
    assert DoorClient(door.url).classify("Fine after the fuzz.").chunk_spans == [(0, 20)]
    assert len(statuses) >= 5, statuses
    save_result("door_fuzz", {"cases": CASES, "statuses": dict(sorted(statuses.items())), "kinds": dict(sorted(kinds.items()))})
