"""The base of every model client: one model, its requests retried under one overload policy on every transport.

Subclasses (clients.radar, clients.ocr, clients.health_code) only turn their inputs into tensors and the output
tensors into results, so that connections, retries and concurrency behave the same for every model. The transports
are Triton's gRPC and HTTP and, with protocol "door", the kit's front door (clients.door: plain JSON, its 429s and
Retry-After): the same calls give the same results through it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from tritonclient.utils import InferenceServerException

from clients import triton
from clients.door import DoorClient, DoorError
from clients.triton import (
    Endpoint,
    RetryCounter,
    RetryPolicy,
    ThreadLocalClients,
    call_with_retry,
    call_with_retry_async,
    map_concurrently,
    rest_json_infer,
)

T = TypeVar("T")
PROTOCOLS = (*triton.PROTOCOLS, "door")
DEFAULT_URLS = {**triton.DEFAULT_URLS, "door": "http://localhost:8080"}
REFUSALS = (InferenceServerException, DoorError)


def transport(
    url: str, protocol: str, retry: RetryPolicy, api_key: str | None
) -> tuple[DoorClient | None, RetryCounter, Endpoint | None]:
    """The door's client (protocol "door") or Triton's endpoint, and the counter of the retries made."""
    if protocol == "door":
        door = DoorClient(url, api_key, retry=retry)
        return door, door.retries, None
    return None, RetryCounter(), Endpoint(url, protocol)


def _arrays(response, names: list[str]) -> dict[str, np.ndarray]:
    return {name: response.as_numpy(name) for name in names}


class ModelClient:
    """Thread-safe synchronous client of one model; `map` keeps `concurrency` requests in flight.

    Overload errors (gRPC UNAVAILABLE, HTTP 503, server restarting) are retried under `retry` and counted in
    `retries.count`; bad input (INVALID_ARG, 400) is raised at once. `base64_json` sends Triton's plain REST JSON
    instead of tritonclient's binary tensors, BYTES inputs as base64 text, for models that decode it.
    `api_key` is the door's X-API-Key (protocol "door"; None: $DOOR_API_KEY, if set). Through the door, `infer` posts to
    the model's tensor route, `route` (default /v1/<model> with - for _, as a model from a spec is served):

        ModelClient("scorer", ["probs"], "localhost:8001").infer({"features": rows})
        ModelClient("scorer", ["probs"], "http://localhost:8080", "door").infer({"features": rows})
    """

    def __init__(
        self,
        model: str,
        outputs: list[str],
        url: str,
        protocol: str = "grpc",
        concurrency: int = 8,
        *,
        retry: RetryPolicy = RetryPolicy(),
        base64_json: bool = False,
        api_key: str | None = None,
        route: str | None = None,
    ):
        if base64_json and protocol != "http":
            raise ValueError("base64 JSON is a plain HTTP/REST request: use protocol 'http'")
        self.model, self.output_names = model, list(outputs)
        self.concurrency = concurrency
        self.retry = retry
        self.base64_json = base64_json
        self.route = route or "/v1/" + model.replace("_", "-")
        self.door, self.retries, self.endpoint = transport(url, protocol, retry, api_key)
        self.clients = None if self.door else ThreadLocalClients(self.endpoint)

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.door:  # the door retries by its own policy, Retry-After included
            answer = self.door.infer(self.route, inputs)
            return {name: answer[name] for name in self.output_names}
        return call_with_retry(self._request(inputs), self.retry, self.retries)

    def _request(self, inputs: dict[str, np.ndarray]) -> Callable[[], dict[str, np.ndarray]]:
        """The call that every attempt repeats; each attempt takes its own thread's client."""
        if self.base64_json:
            return functools.partial(rest_json_infer, self.endpoint.url, self.model, inputs, self.output_names)
        request, outputs = self.endpoint.inputs(inputs), self.endpoint.outputs(self.output_names)
        return lambda: _arrays(self.clients.get().infer(self.model, request, outputs=outputs), self.output_names)

    def map(self, fn: Callable[[Any], T], items: Iterable) -> list[T | InferenceServerException | DoorError]:
        """`fn(item)` for every item, `concurrency` in flight, in order; a refused request yields its exception."""
        return map_concurrently(fn, items, self.concurrency, REFUSALS)

    def close(self) -> None:
        if self.clients:
            self.clients.close()


class AsyncModelClient:
    """asyncio client of one model for services that already run an event loop; retries and counts like ModelClient.

    Through the door (protocol "door") each call runs the door client in a worker thread: it is the standard
    library's HTTP, which blocks, and the same retry policy with Retry-After applies.
    """

    def __init__(
        self,
        model: str,
        outputs: list[str],
        url: str,
        protocol: str = "grpc",
        *,
        retry: RetryPolicy = RetryPolicy(),
        api_key: str | None = None,
    ):
        self.model, self.output_names = model, list(outputs)
        self.retry = retry
        self.door, self.retries, self.endpoint = transport(url, protocol, retry, api_key)
        self.client = None if self.door else self.endpoint.client(asyncio=True)

    async def through_door(self, call: Callable[..., T], *args) -> T:
        return await asyncio.to_thread(call, *args)

    async def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        request = self.endpoint.inputs(inputs, asyncio=True)
        outputs = self.endpoint.outputs(self.output_names, asyncio=True)

        async def send() -> dict[str, np.ndarray]:
            return _arrays(await self.client.infer(self.model, request, outputs=outputs), self.output_names)

        return await call_with_retry_async(send, self.retry, self.retries)

    async def map(self, fn: Callable[[Any], Awaitable[T]], items: Iterable, concurrency: int = 8) -> list:
        """`await fn(item)` for every item, `concurrency` in flight, in order; a refused request yields its exception."""
        limit = asyncio.Semaphore(concurrency)

        async def one(item):
            async with limit:
                try:
                    return await fn(item)
                except REFUSALS as exc:
                    return exc

        return await asyncio.gather(*(one(item) for item in items))

    async def close(self) -> None:
        if self.client:
            await self.client.close()


class SpecModelClient(ModelClient):
    """Thread-safe synchronous client of a spec's entry model (one text or image per request, its `OUTPUTS`); `map`
    keeps `concurrency` in flight."""

    OUTPUTS: list[str]

    def __init__(
        self,
        model: str,
        url: str,
        protocol: str = "grpc",
        concurrency: int = 8,
        retry: RetryPolicy = RetryPolicy(),
        api_key: str | None = None,
        route: str | None = None,
    ):
        super().__init__(model, self.OUTPUTS, url, protocol, concurrency, retry=retry, api_key=api_key, route=route)


def add_api_key(parser) -> None:
    """The command lines' --api-key: the door's X-API-Key (protocol door)."""
    parser.add_argument("--api-key", help="the door's X-API-Key, for --protocol door (default: $DOOR_API_KEY)")


def spec_model_parser(doc: str, files: str) -> argparse.ArgumentParser:
    """The command line of a client of a spec's model: its files, the model by name, where it is served, how many
    requests go at once, the door's key, and JSON output."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(files, nargs="+", type=Path)
    parser.add_argument("--model", required=True, help="the spec's name (its entry model)")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="grpc")
    parser.add_argument("--url", help="host:port for grpc (default localhost:8001) and http (localhost:8000); the door's URL")
    parser.add_argument("--route", help="the door's path, where the spec names one (default /v1/<model>)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default 8)")
    add_api_key(parser)
    parser.add_argument("--json", action="store_true", help=f"one JSON object per {files.rstrip('s')}")
    return parser


def report_all(client: ModelClient, call: Callable[[list], list], items: list, paths: list, report: Callable) -> int:
    """The command lines' end: `call(items)` on `client` (closed after), one `report(path, result)` line printed per
    item; exit status 1 where any item failed."""
    try:
        results = call(items)
    finally:
        client.close()
    for path, result in zip(paths, results):
        print(report(path, result))
    return 1 if any(isinstance(r, Exception) for r in results) else 0
