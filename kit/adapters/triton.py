"""The one place where model.py files meet Triton's Python backend: errors, responses and BLS calls.

`triton_python_backend_utils` exists only inside a stub, so it is imported when first used; the
module stays importable (and its users testable for imports) outside one.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

import numpy as np

from kit.pipelines.errors import InputError

T = TypeVar("T")


def pb():
    import triton_python_backend_utils

    return triton_python_backend_utils


class ModelCallError(RuntimeError):
    """A BLS request to another model of the server failed; the message names the model."""


def error_response(message: str, code: str = "INVALID_ARG"):
    """An error for this request alone; `code` is a TritonError code name (INVALID_ARG, UNAVAILABLE, INTERNAL)."""
    utils = pb()
    return utils.InferenceResponse(error=utils.TritonError(message, getattr(utils.TritonError, code)))


def response(outputs: dict[str, np.ndarray]):
    utils = pb()
    return utils.InferenceResponse([utils.Tensor(name, value) for name, value in outputs.items()])


def input_array(request, name: str) -> np.ndarray:
    return pb().get_input_tensor_by_name(request, name).as_numpy()


def request_parameters(request) -> dict:
    """The parameters a client set on the request (Triton's request parameters, not the model's config)."""
    return json.loads(request.parameters() or "{}")


async def infer(model: str, inputs: dict[str, np.ndarray], outputs: list[str], trace=None, version: int = -1) -> list[np.ndarray]:
    """One BLS request to `model` of this server (its `version`; -1: the newest loaded); its outputs in the
    order asked for."""
    utils = pb()
    request = utils.InferenceRequest(
        model_name=model,
        model_version=version,
        inputs=[utils.Tensor(name, value) for name, value in inputs.items()],
        requested_output_names=outputs,
        **({"trace": trace} if trace is not None else {}),
    )
    result = await request.async_exec()
    if result.has_error():
        raise ModelCallError(f"{model}: {result.error().message()}")
    return [utils.get_output_tensor_by_name(result, name).as_numpy() for name in outputs]


async def answer(handle: Callable[[object], Awaitable[dict[str, np.ndarray]]], request, model: str):
    """`handle(request)`'s outputs as a response. Bad input fails as INVALID_ARG; a refused or failed
    call to another model as UNAVAILABLE, which clients retry (Triton refuses overload that way)."""
    try:
        return response(await handle(request))
    except InputError as exc:
        return error_response(str(exc), "INVALID_ARG")
    except ModelCallError as exc:
        return error_response(f"{model} failed: {exc}", "UNAVAILABLE")


class Replies:
    """The responses of a batch of requests that a model handles together, each sent on its own as soon as it is
    ready (the response sender, which a model that is not decoupled may use once per request; its `execute`
    then returns None), so that a request never waits for the others of its batch. Every request is answered
    exactly once: bad input fails its request alone (INVALID_ARG), a refused or failed call to another model
    the requests that needed it (UNAVAILABLE, which clients retry), and `close` answers whatever is left."""

    def __init__(self, requests, model: str):
        self.senders = [request.get_response_sender() for request in requests]
        self.open, self.model = set(range(len(requests))), model

    def checked(self, check: Callable[[object], T], requests) -> tuple[list[int], list[T]]:
        """`check(request)` of every request (its decoded input): the ones that pass, by index; the others fail."""
        kept, values = [], []
        for index, request in enumerate(requests):
            try:
                values.append(check(request))
                kept.append(index)
            except InputError as exc:
                self.fail(index, exc)
        return kept, values

    def send(self, index: int, reply) -> None:
        if index in self.open:
            self.open.discard(index)
            self.senders[index].send(reply, flags=pb().TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def answer(self, index: int, outputs: dict[str, np.ndarray]) -> None:
        self.send(index, response(outputs))

    def fail(self, index: int, exc: Exception) -> None:
        if isinstance(exc, InputError):
            self.send(index, error_response(str(exc), "INVALID_ARG"))
        elif isinstance(exc, ModelCallError):
            self.send(index, error_response(f"{self.model} failed: {exc}", "UNAVAILABLE"))
        else:
            self.send(index, error_response(f"{self.model} failed: {type(exc).__name__}: {exc}", "INTERNAL"))

    def close(self, exc: Exception | None = None) -> None:
        """Whatever is still unanswered fails: with `exc`, what stopped the batch, or as a bug."""
        for index in sorted(self.open):
            self.fail(index, exc or RuntimeError("the request was not answered"))
