"""Protocol-neutral helpers over tritonclient: one call site for HTTP and gRPC, sync and asyncio, plus
Triton's plain REST JSON over the standard library; and the overload retry rule that every client follows."""

from __future__ import annotations

import asyncio as aio
import base64
import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from tritonclient.utils import InferenceServerException, np_to_triton_dtype, triton_to_np_dtype

T = TypeVar("T")

PROTOCOLS = ("grpc", "http")
DEFAULT_URLS = {"grpc": "localhost:8001", "http": "localhost:8000"}


def protocol_module(protocol: str, asyncio: bool = False):
    if protocol == "grpc":
        if asyncio:
            import tritonclient.grpc.aio as module
        else:
            import tritonclient.grpc as module
    elif protocol == "http":
        if asyncio:
            import tritonclient.http.aio as module
        else:
            import tritonclient.http as module
    else:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, not {protocol!r}")
    return module


@dataclass
class Endpoint:
    url: str
    protocol: str = "grpc"

    def client(self, asyncio: bool = False) -> Any:
        return protocol_module(self.protocol, asyncio).InferenceServerClient(self.url)

    def inputs(self, arrays: dict[str, np.ndarray], asyncio: bool = False) -> list:
        module = protocol_module(self.protocol, asyncio)
        return [_infer_input(module, name, array) for name, array in arrays.items()]

    def outputs(self, names: list[str], asyncio: bool = False) -> list:
        module = protocol_module(self.protocol, asyncio)
        return [module.InferRequestedOutput(name) for name in names]


def _infer_input(module, name: str, array: np.ndarray):
    infer_input = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
    infer_input.set_data_from_numpy(array)
    return infer_input


def rest_json_infer(
    url: str, model: str, inputs: dict[str, np.ndarray], outputs: list[str], timeout: float = 120
) -> dict[str, np.ndarray]:
    """One inference as the plain HTTP/REST JSON body a browser or phone app sends, with only the standard library.

    JSON carries no raw bytes, so BYTES elements go as base64 text: only for models that decode it (ocr,
    health_code). Errors are raised as tritonclient raises them, so that `is_retryable` judges them alike:
    InferenceServerException with the HTTP status, or the ConnectionError of a server not listening.
    """
    body = {
        "inputs": [_json_input(name, array) for name, array in inputs.items()],
        "outputs": [{"name": name} for name in outputs],
    }
    request = urllib.request.Request(
        f"http://{url}/v2/models/{model}/infer", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            document = json.load(response)
    except urllib.error.HTTPError as exc:
        raise InferenceServerException(_error_message(exc), str(exc.code)) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionError):
            raise exc.reason from None
        raise
    result = {}
    for output in document["outputs"]:
        if output["datatype"] == "BYTES":
            values = np.array([v.encode("utf-8") for v in output["data"]], dtype=np.object_)
        else:
            values = np.array(output["data"], dtype=triton_to_np_dtype(output["datatype"]))
        result[output["name"]] = values.reshape(output["shape"])
    return result


def _json_input(name: str, array: np.ndarray) -> dict:
    datatype = np_to_triton_dtype(array.dtype)
    if datatype == "BYTES":
        data = [base64.b64encode(v.encode("utf-8") if isinstance(v, str) else v).decode("ascii") for v in array.flat]
    else:
        data = array.reshape(-1).tolist()
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": data}


def _error_message(exc: urllib.error.HTTPError) -> str:
    """Triton's {"error": ...}; a proxy in front of it may answer 503 with a body that is not JSON."""
    try:
        return json.loads(exc.read())["error"]
    except (ValueError, KeyError, TypeError):
        return str(exc)


class ThreadLocalClients:
    """One synchronous client per thread: tritonclient's HTTP client runs on gevent, which cannot be
    shared between threads (gRPC's could, but one code path for both is simpler)."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self._local = threading.local()
        self._all: list = []
        self._lock = threading.Lock()

    def get(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self.endpoint.client()
            with self._lock:
                self._all.append(client)
        return client

    def close(self) -> None:
        with self._lock:
            for client in self._all:
                client.close()
            self._all.clear()


# Triton sheds load with gRPC UNAVAILABLE / HTTP 503 ("Exceeds maximum queue size", "Request timeout
# expired") and sends no Retry-After; a restarting server refuses connections. None of these did any
# work, and inference has no side effects, so they are safe to retry. INVALID_ARG / 400 never is.
RETRYABLE_STATUSES = frozenset({"StatusCode.UNAVAILABLE", "503"})
# Two answers of a server that is going away or coming back, retried like a restarting server's: a request routed to a
# model instance whose Python stub died (INTERNAL / 500 from the model itself, UNAVAILABLE where an entry model relays
# it: the kit's supervisor restarts the server within seconds), and a request for a model none of whose versions is
# loaded at the moment (NOT_FOUND / 400 while a stopping server unloads its models and still answers, as it does for
# the seconds of a restart or a rolling update). The door answers both with 503 and Retry-After.
TRANSIENT = ("is not healthy", "has no available versions")


def is_retryable(exc: BaseException) -> bool:
    """True for overload, an unreachable or restarting server and a dead stub; false for bad input and server bugs.

    gRPC also answers a call to an admin endpoint without its key with UNAVAILABLE: not retried.
    """
    if isinstance(exc, InferenceServerException):
        message = exc.message() or ""
        if exc.status() in RETRYABLE_STATUSES:
            return "is restricted" not in message
        return any(reason in message for reason in TRANSIENT)
    return isinstance(exc, ConnectionError)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter: before retry n, sleep uniform(0, min(cap, base * 2**n)).

    Full jitter spreads the retries of many rejected clients over the whole window, so that they do
    not come back in step and overload the queue again. `attempts` counts the first try.
    """

    attempts: int = 8
    base: float = 0.05
    cap: float = 2.0

    def delays(self) -> Iterator[float]:
        for n in range(self.attempts - 1):
            yield random.uniform(0.0, min(self.cap, self.base * 2**n))


NO_RETRY = RetryPolicy(attempts=1)
OnRetry = Callable[[BaseException, float], None]


class RetryCounter:
    """An `on_retry` that counts the retries of one client, shared by its threads or tasks."""

    def __init__(self):
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, exc: BaseException, delay: float) -> None:
        with self._lock:
            self.count += 1


def call_with_retry(call: Callable[[], T], policy: RetryPolicy, on_retry: OnRetry | None = None) -> T:
    delays = policy.delays()
    while True:
        try:
            return call()
        except Exception as exc:
            delay = next(delays, None) if is_retryable(exc) else None
            if delay is None:
                raise
            if on_retry is not None:
                on_retry(exc, delay)
            time.sleep(delay)


async def call_with_retry_async(call: Callable[[], Awaitable[T]], policy: RetryPolicy, on_retry: OnRetry | None = None) -> T:
    delays = policy.delays()
    while True:
        try:
            return await call()
        except Exception as exc:
            delay = next(delays, None) if is_retryable(exc) else None
            if delay is None:
                raise
            if on_retry is not None:
                on_retry(exc, delay)
            await aio.sleep(delay)


def map_concurrently(
    fn: Callable[[Any], T],
    items: Iterable,
    concurrency: int,
    refusals: tuple[type[Exception], ...] = (InferenceServerException,),
) -> list[T | Exception]:
    """`fn(item)` for every item, `concurrency` at a time, in order; a request the server refused
    (one of `refusals`) yields its exception in place of a result, so one bad file does not hide the
    others' answers."""

    def one(item):
        try:
            return fn(item)
        except refusals as exc:
            return exc

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, items))
