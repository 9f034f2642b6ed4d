"""Protocol-neutral helpers over tritonclient: one call site for HTTP and gRPC, sync and asyncio."""

from __future__ import annotations

import asyncio as aio
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from tritonclient.utils import InferenceServerException

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
    from tritonclient.utils import np_to_triton_dtype

    infer_input = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
    infer_input.set_data_from_numpy(array)
    return infer_input


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


def is_retryable(exc: BaseException) -> bool:
    """True for overload and unreachable-server errors; false for bad input and server bugs.

    gRPC also answers a call to an admin endpoint without its key with UNAVAILABLE: not retried.
    """
    if isinstance(exc, InferenceServerException):
        return exc.status() in RETRYABLE_STATUSES and "is restricted" not in (exc.message() or "")
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


async def call_with_retry_async(
    call: Callable[[], Awaitable[T]], policy: RetryPolicy, on_retry: OnRetry | None = None
) -> T:
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


def map_concurrently(fn: Callable[[Any], T], items: Iterable, concurrency: int) -> list[T | InferenceServerException]:
    """`fn(item)` for every item, `concurrency` at a time, in order; a request the server refused
    yields its exception in place of a result, so one bad file does not hide the others' answers."""
    def one(item):
        try:
            return fn(item)
        except InferenceServerException as exc:
            return exc

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, items))
