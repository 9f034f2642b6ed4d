"""The front door as the served tests run it: a `python -m door` process on a free port in front of the session's
Triton, waited for until it answers, stopped at the end; and the calls and checks the door's tests share."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import urllib3

from kit.server.runtime import free_port
from tests.conftest import REPO_ROOT
from tests.served.reliability import wait_for

PROBLEM = "application/problem+json"


@dataclass
class Door:
    url: str
    process: subprocess.Popen
    log: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@contextlib.contextmanager
def running_door(triton: str, log: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Door]:
    port = free_port()
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "door", "--triton", triton, "--port", str(port), "--wait", "60", *args],
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    door = Door(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 60
        while not answers(door.url):
            assert process.poll() is None and time.monotonic() < deadline, f"the door did not start: {log.read_text()[-2000:]}"
            time.sleep(0.1)
        yield door
    finally:
        process.terminate()
        process.wait(20)


def answers(url: str) -> bool:
    try:
        return urllib3.request("GET", f"{url}/health/live", timeout=1, retries=False).status == 200
    except urllib3.exceptions.HTTPError:
        return False


def logged(door: Door, needle: str, timeout: float = 10) -> bool:
    """Whether `needle` reaches the door's log within `timeout`: the access line is written after the
    response has gone out, so a client can read its answer before the line is there."""
    return wait_for(lambda: needle in door.log.read_text(), timeout, every=0.05)


def call(door: Door, method: str, path: str, **kwargs) -> urllib3.BaseHTTPResponse:
    return urllib3.request(method, f"{door.url}{path}", timeout=60, retries=False, **kwargs)


def metrics(door: Door) -> dict[str, float]:
    """The door's samples by name and labels, e.g. `door_canary_runs_total{result="ok"}`."""
    rows = call(door, "GET", "/metrics").data.decode().splitlines()
    return {name: float(value) for name, value in (row.rsplit(" ", 1) for row in rows if row and not row.startswith("#"))}


def assert_problem(response, status: int, kind: str) -> dict:
    assert response.status == status, response.data[:300]
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["type"] == f"urn:triton-kit:problem:{kind}" and body["status"] == status and body["detail"]
    return body


def assert_same_answer(alone: dict, together: dict) -> None:
    assert alone == together, "a text of a batched request differs from it sent alone"


def answers_as_alone(
    door: Door, route: str, texts: list[str], assert_alike: Callable[[dict, dict], None] = assert_same_answer
) -> list[dict]:
    """The answers to `texts` sent in one request on the door's text `route`, each checked by `assert_alike` against
    the answer to its text sent alone."""
    together = call(door, "POST", route, json={"texts": texts})
    assert together.status == 200, together.data[:500]
    answers = together.json()
    for text, answer in zip(texts, answers):
        alone = call(door, "POST", route, json={"text": text})
        assert alone.status == 200, alone.data[:500]
        assert_alike(alone.json(), answer)
    return answers


def named(reference: dict) -> str:
    """The name of the component a JSON Schema's `$ref` points to."""
    return reference["$ref"].rsplit("/", 1)[1]


def answer_schema(door: Door, route: str) -> tuple[dict, dict]:
    """The JSON Schema of the door's answer to one text on `route`, from its OpenAPI document, and the document's
    named schemas, for the `$ref`s in it."""
    document = call(door, "GET", "/openapi.json").json()
    result = document["paths"][route]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    components = document["components"]["schemas"]
    return components[named(result["anyOf"][0])], components


@contextlib.contextmanager
def client_on(protocol: str, server, door: Door, client_type: Callable, model: str, **options) -> Iterator:
    """A `client_type` client of `model` over `protocol` (the server's gRPC or HTTP URL, or the door's), made with
    `options`; closed after."""
    url = {"grpc": server.options.grpc_url, "http": server.options.http_url, "door": door.url}[protocol]
    client = client_type(model, url, protocol, **options)
    try:
        yield client
    finally:
        client.close()
