"""The kit's models through its front door (door/, docs/DOOR.md): plain HTTP and JSON, standard library only.

    client = DoorClient("http://127.0.0.1:8080", api_key=None)   # None: $DOOR_API_KEY, if set
    client.classify("Some text.")          # RadarResult, as clients.radar returns
    client.read(png_bytes)                 # [OcrLine], as clients.ocr returns
    client.health_code(png_bytes)          # {"color", "qr", "texts", "fields"}
    client.resnet50(array)                 # float32 probabilities, from a [3, h, w] float32 array (sent as its bytes)

The retry policy is the other clients' (clients.triton.RetryPolicy): the door's 429 (a full queue) and
503 (Triton restarting), and a refused or reset connection, are retried; bad input never is. The door
says when to come back (Retry-After, from what it measures): each retry waits that long plus the
policy's jittered backoff, so clients refused together do not return together.
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

import numpy as np

from clients.results import OcrLine, RadarResult
from clients.triton import RetryCounter, RetryPolicy

RETRY_STATUSES = frozenset({429, 503})
API_KEY_ENV = "DOOR_API_KEY"  # the key a client sends when none is given (the door's keys: $DOOR_API_KEYS)


class DoorError(Exception):
    """An answer other than success: the HTTP status, the problem body (RFC 9457) and Retry-After, if any."""

    def __init__(self, status: int, problem: dict, retry_after: float | None = None):
        self.status, self.problem, self.retry_after = status, problem, retry_after
        super().__init__(f"{status} {problem.get('title', '')}: {problem.get('detail', '')}".strip())


def retryable(exc: BaseException) -> bool:
    return isinstance(exc, DoorError) and exc.status in RETRY_STATUSES or isinstance(exc, ConnectionError)


def radar_result(answer: dict) -> RadarResult:
    chunks = answer["chunks"]
    return RadarResult(answer["score"], [c["score"] for c in chunks], [(c["start"], c["end"]) for c in chunks])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class DoorClient:
    """Thread-safe (each call opens its own connection); `retries.count` counts the retries."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        api_key: str | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float = 120.0,
    ):
        self.url, self.retry, self.timeout = url.rstrip("/"), retry, timeout
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self.retries = RetryCounter()

    def classify(self, text: str) -> RadarResult:
        return radar_result(self.post("/v1/radar", {"text": text}))

    def classify_many(self, texts: list[str]) -> list[RadarResult]:
        """Several texts in one call (at most the door's texts per call)."""
        return [radar_result(answer) for answer in self.post("/v1/radar", {"texts": texts})]

    def read(self, image: bytes) -> list[OcrLine]:
        return [
            OcrLine(line["text"], line["score"], line["box"]) for line in self.post("/v1/ocr", {"image": b64(image)})["lines"]
        ]

    def health_code(self, image: bytes) -> dict:
        return self.post("/v1/health-code", {"image": b64(image)})

    def resnet50(self, image: np.ndarray, binary: bool = True) -> np.ndarray:
        return self.pixels("/v1/resnet50", image, binary)

    def pixels(self, path: str, image: np.ndarray, binary: bool = True) -> np.ndarray:
        """A pixels route's probabilities for a [C, H, W] image: sent as its float32 bytes (the shape in the query), a
        third smaller than base64 in JSON and nothing for the door to decode; `binary=False` sends the JSON body."""
        data = np.ascontiguousarray(image, dtype="<f4")
        if binary:
            answer = self.post(f"{path}?shape={','.join(map(str, data.shape))}", data.tobytes())
        else:
            answer = self.post(path, {"shape": list(data.shape), "data": b64(data.tobytes())})
        return np.array(answer["probs"], dtype=np.float32)

    def infer(self, path: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A model's tensor route (a model from a spec, docs/MODELS.md): inputs and outputs by tensor name, rows first.
        Outputs come back as JSON numbers: float64 or int64 arrays, None where the model answered NaN or infinity."""
        answer = self.post(path, {"inputs": {name: np.asarray(value).tolist() for name, value in inputs.items()}})
        return {name: np.array(value) for name, value in answer["outputs"].items()}

    def post(self, path: str, body: dict | bytes) -> Any:
        """`body` as JSON, or bytes as they are (application/octet-stream)."""
        delays = self.retry.delays()
        while True:
            try:
                return self._send(path, body)
            except (DoorError, ConnectionError) as exc:
                jitter = next(delays, None) if retryable(exc) else None
                if jitter is None:
                    raise
                delay = (getattr(exc, "retry_after", None) or 0.0) + jitter
                self.retries(exc, delay)
                time.sleep(delay)

    def _send(self, path: str, body: dict | bytes) -> Any:
        raw = isinstance(body, bytes)
        headers = {
            "Content-Type": "application/octet-stream" if raw else "application/json",
            **({"X-API-Key": self.api_key} if self.api_key else {}),
        }
        request = urllib.request.Request(f"{self.url}{path}", body if raw else json.dumps(body).encode("utf-8"), headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            raise DoorError(exc.code, _problem(exc), _seconds(exc.headers.get("Retry-After"))) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ConnectionError):
                raise exc.reason from None
            raise


def _problem(exc: urllib.error.HTTPError) -> dict:
    try:
        problem = json.loads(exc.read())
    except ValueError:
        problem = None
    return problem if isinstance(problem, dict) else {"title": exc.reason, "detail": ""}


def _seconds(value: str | None) -> float | None:
    """Retry-After in seconds (the door sends seconds; an HTTP date is not used)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
