"""Protocol-neutral helpers over tritonclient: one call site for HTTP and gRPC, sync and asyncio."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

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
