"""The door's one gRPC connection to Triton (tritonclient's asyncio client), and what Triton's answers
become at the door: outputs, or a problem with the status a client can act on."""

from __future__ import annotations

import asyncio
import dataclasses
import functools

import numpy as np
import tritonclient.grpc.aio as grpcaio
from tritonclient.utils import InferenceServerException

from door import wire
from door.coalesce import REFUSED, Coalescer
from door.contract import Contract, Served
from door.flow import Flow
from door.problems import Problem
from door.settings import DoorSettings
from door.shared_memory import SharedInputs
from kit.control.canary import GoldenSet, golden_from_parameter
from kit.control.configs import parameters

# Triton's refusals by a bounded queue (full, or waited too long), also when relayed by an entry model.
OVERLOAD = ("maximum queue size", "timeout expired")
# A dead stub's instance, and a model with no version loaded while a stopping server unloads them: a server going away
# or coming back, as clients.triton.TRANSIENT says (the door's image holds kit/ and door/ alone).
RESTARTING = ("is not healthy", "has no available versions")
PROBE_TIMEOUT = 2.0  # seconds for a readiness question: a hung server is not ready
COALESCED_BYTES = 4 << 20  # text in one coalesced request, at most (a longer text goes alone)
UNSETTLED = ("DEADLINE_EXCEEDED", "UNAVAILABLE", "CANCELLED")  # a call ended with no word from Triton, which may hold it
TOKENIZED = ("TOKENIZED_IDS", "TOKENIZED_TEXTS", "TOKENIZED_SPANS")  # a text model's tokens (kit.adapters.grouped_calls)


@dataclasses.dataclass(frozen=True)
class Asked:
    """What a request of a route's inputs asks, where it is not the route's model and outputs: the model it goes to,
    the outputs it wants and the request parameters it carries (a text model's tokens: Upstream.tokenize)."""

    target: str
    outputs: tuple[str, ...]
    parameters: dict | None = None


class Upstream:
    """Sends complete, checked requests to Triton and keeps each model's Flow (door.flow)."""

    def __init__(self, settings: DoorSettings, contract: Contract):
        self.settings = settings
        self.contract = contract
        self.flows = {model: Flow(settings.rate_window, settings.max_retry_after) for model in contract.models}
        self.coalescers = {model: c for model, served in contract.models.items() if (c := self.coalescer(model, served))}
        self.client: grpcaio.InferenceServerClient | None = None
        self.inference: wire.Channel | None = None  # inference requests, built by door.wire
        self.shared = SharedInputs(settings.shared_memory_mb, settings.admin_headers, settings.triton_timeout)
        # The version of each model that answered last: a new one is loaded without a restart (kit.server.deploy).
        self.versions: dict[str, str] = {}

    def coalescer(self, model: str, served: Served) -> Coalescer | None:
        """The Coalescer of an entry that takes several texts, or several images, in one request (door.coalesce)."""
        texts, images = served.texts_at_once, served.images_at_once
        if not self.settings.coalesce_in_flight or max(texts, images) == 1:
            return None
        send = functools.partial(self.send_texts if texts > 1 else self.send_images, model)
        at_once, flow = max(texts, images), self.flows[model]
        return Coalescer(
            model, send, flow, self.settings.coalesce_in_flight, at_once, COALESCED_BYTES, self.settings.coalesce_waiting
        )

    async def open(self) -> None:
        self.client = grpcaio.InferenceServerClient(self.settings.triton)
        self.inference = wire.Channel(self.settings.triton)
        await self.shared.open(self.client)

    async def close(self) -> None:
        await self.shared.close(self.client)
        if self.client is not None:
            await self.client.close()
        if self.inference is not None:
            await self.inference.close()

    async def infer(self, model: str, arrays: dict[str, np.ndarray], request_id: str = "") -> dict[str, np.ndarray]:
        """One request's outputs, counted in the model's Flow."""
        return await self.counted(model, self.call(model, arrays, request_id, self.settings.triton_timeout))

    async def tokenize(self, model: str, text: bytes, add_special_tokens: bool, request_id: str = "") -> dict[str, np.ndarray]:
        """The tokens of `text` by the tokenizer of the text model `model` (TOKENIZED_IDS, _TEXTS, _SPANS): a request
        with the parameter `tokenize` to the model its entry names, which answers at once. The text goes in as the
        entry's last input (TEXT, or a cross-encoder's DOCUMENT), every other input empty."""
        served = self.contract[model]
        *others, last = served.spec.inputs
        arrays = {name: np.array([[b""]], dtype=np.object_) for name in others} | {last: np.array([[text]], dtype=np.object_)}
        asked = Asked(served.tokenizer, TOKENIZED, {"tokenize": True, "add_special_tokens": add_special_tokens})
        return await self.counted(model, self.call(model, arrays, request_id, self.settings.triton_timeout, asked))

    async def counted(self, model: str, call) -> dict[str, np.ndarray]:
        """`call`'s outputs, counted in `model`'s Flow: a refusal as refused, any other answer as answered."""
        flow = self.flows[model]
        flow.start()
        answered = False
        try:
            outputs = await call
            answered = True
            return outputs
        except Problem as problem:
            answered = problem.status not in REFUSED
            raise
        finally:
            flow.finish(answered=answered)

    async def infer_texts(self, model: str, texts: list[bytes], request_id: str = "") -> list[dict[str, np.ndarray]]:
        """Each text's outputs from the text entry `model`: coalesced with other calls' texts where the entry takes
        several at once (door.coalesce), else a request each, all at once; the first refusal where one is refused."""
        coalescer = self.coalescers.get(model)
        if coalescer is not None:
            return await coalescer.infer(texts, request_id, self.settings.triton_timeout)
        return await gathered(self.infer(model, {"TEXT": np.array([text], dtype=np.object_)}, request_id) for text in texts)

    async def infer_image(self, model: str, data: bytes, request_id: str = "") -> dict[str, np.ndarray]:
        """An encoded image's outputs from the image entry `model`: coalesced with other calls' images where the entry
        takes several at once (door.coalesce), else a request of its own."""
        coalescer = self.coalescers.get(model)
        if coalescer is not None:
            (outputs,) = await coalescer.infer([data], request_id, self.settings.triton_timeout)
            return outputs
        return await self.infer(
            model, {"IMAGE": np.array([[data]] if self.contract[model].batched else [data], dtype=np.object_)}, request_id
        )

    async def send_texts(self, model: str, texts: list[bytes], request_ids: list[str], seconds: float) -> dict:
        """One request of several texts (a Coalescer's), its id every text's request id."""
        request_id = ",".join(dict.fromkeys(request_ids))
        return await self.call(model, {"TEXT": np.array(texts, dtype=np.object_)}, request_id, seconds)

    async def send_images(self, model: str, images: list[bytes], request_ids: list[str], seconds: float) -> dict:
        """One request of several encoded images (a Coalescer's), a row each, its id every image's request id."""
        rows = np.empty((len(images), 1), dtype=np.object_)
        rows[:, 0] = images
        return await self.call(model, {"IMAGE": rows}, ",".join(dict.fromkeys(request_ids)), seconds)

    async def call(
        self,
        model: str,
        arrays: dict[str, np.ndarray],
        request_id: str,
        seconds: float,
        asked: Asked | None = None,
        shared: bool = True,
    ) -> dict[str, np.ndarray]:
        """One request of the inputs of `model`'s route (to `model` and its outputs, unless `asked` says otherwise):
        its outputs, or the Problem its refusal is. Large tensors go through shared memory unless `shared` is False;
        a request Triton refused for a region it lost (it restarted) is registered again and sent in the message."""
        served = self.contract[model]
        asked = asked or Asked(model, served.outputs)
        datatypes = {name: served.datatype(name) for name in arrays}
        placed = self.shared.place(arrays, datatypes) if shared else {}
        message = wire.request(asked.target, arrays, datatypes, asked.outputs, request_id, asked.parameters, placed)
        settled = False  # whether Triton is done with the request: its answer or its refusal came
        try:
            result = await self.inference.infer(message, seconds)
            settled = True
        except InferenceServerException as exc:
            settled = not (exc.status() or "").endswith(UNSETTLED)
            if placed and self.shared.lost(exc):
                await self.shared.recover(self.client, placed)
                return await self.call(model, arrays, request_id, seconds, asked, shared=False)
            raise self.problem(model, exc) from None
        finally:
            self.shared.release(placed, settled)
        if asked.target == model:
            self.versions[model] = result.get_response().model_version
        return {name: result.as_numpy(name) for name in asked.outputs}

    async def golden_set(self, model: str) -> GoldenSet | None:
        """The golden set the served config of `model` carries now (a new version brings its own)."""
        config = (await self.client.get_model_config(model, client_timeout=PROBE_TIMEOUT)).config
        section = parameters(config).get("canary")
        return golden_from_parameter(section) if section else None

    def problem(self, model: str, exc: InferenceServerException) -> Problem:
        message = f"{model}: {exc.message() or exc}"
        if overloaded(exc):
            return Problem(429, "overloaded", message, {"Retry-After": str(self.flows[model].retry_after())})
        if unavailable(exc):
            return Problem(503, "unavailable", message, {"Retry-After": str(self.settings.unavailable_retry_after)})
        status = exc.status() or ""
        if status.endswith("INVALID_ARGUMENT"):
            return Problem(422, "invalid-input", message)
        if status.endswith("DEADLINE_EXCEEDED"):
            return Problem(504, "upstream-timeout", message)
        return Problem(502, "upstream-error", message)

    async def readiness(self) -> dict[str, bool]:
        """Triton's own readiness and each routed model's; False for whatever cannot be asked."""
        answer = {"server": await self._ask(self.client.is_server_ready(client_timeout=PROBE_TIMEOUT))}
        for model in self.contract.models:
            answer[model] = answer["server"] and await self._ask(self.client.is_model_ready(model, client_timeout=PROBE_TIMEOUT))
        return answer

    async def version_ready(self, model: str, version: str) -> bool | None:
        """Whether one version of a model serves; None where Triton did not answer."""
        try:
            return bool(await self.client.is_model_ready(model, version, client_timeout=PROBE_TIMEOUT))
        except InferenceServerException as exc:  # a refusal names the version unknown; no status: nothing answered
            return None if not exc.status() or exc.status().endswith(("UNAVAILABLE", "DEADLINE_EXCEEDED")) else False

    @staticmethod
    async def _ask(call) -> bool:
        try:
            return bool(await call)
        except InferenceServerException:
            return False


def overloaded(exc: InferenceServerException) -> bool:
    return (exc.status() or "").endswith("UNAVAILABLE") and any(reason in (exc.message() or "") for reason in OVERLOAD)


def unavailable(exc: InferenceServerException) -> bool:
    """Triton unreachable or restarting (UNAVAILABLE that is not a queue's refusal, or a model with no version loaded
    while a stopping server unloads them), or a model instance whose Python stub died (the supervisor restarts the
    server): what clients.triton.is_retryable retries."""
    message = exc.message() or ""
    return not overloaded(exc) and ((exc.status() or "").endswith("UNAVAILABLE") or any(r in message for r in RESTARTING))


async def gathered(calls) -> list:
    """Every call's answer, all asked at once; the first refusal where one is refused."""
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes
