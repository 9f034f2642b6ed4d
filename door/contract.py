"""What the door may send each model, and the limits it holds requests to, read from the configs
Triton serves: one source with the models, not a second hand-kept copy.

A served config that names a route (`door_route`, kit.control.specs) gets one. Its `door_answer` says what the
route takes and answers (a text's score, an image's lines, every tensor by name, ...), and ANSWERS holds the
tensors each answer feeds and reads. At start the door asks Triton for every such config, checks those tensors
against it (a renamed tensor stops the door instead of failing every request), and parses the config's
parameters with the model's own typed settings (kit.adapters.settings), the class its model.py reads them with,
known from its answer:
a text's max_text_bytes, an image's max_image_bytes and max_pixels, a pixel tensor's max_image_pixels and its
channel count, and the golden set of the served-numerics canary that the build put on a text model
(kit.control.canary). A model the server does not serve gets no route. The same function reads the configs a
build writes (kit.control.repository.plan), which is how the unit tests hold it to the shipped specs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import tritonclient.grpc as grpcclient
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from kit.adapters.settings import (
    ImageClassifierSettings,
    PipelineSettings,
    PixelClassifierSettings,
    Settings,
    SettingsError,
    TextSettings,
)
from kit.control.canary import CanaryError, GoldenSet, golden_from_parameter
from kit.control.configs import parameters, wire_type
from kit.control.specs import (
    DOOR_ANSWER,
    DOOR_ANSWERS,
    DOOR_AXES,
    DOOR_DESCRIPTION,
    DOOR_ROUTE,
    DOOR_SCHEMA,
    DOOR_TOKENIZER,
    TENSORS,
)

log = logging.getLogger("door")

ANY = None  # a dimension the route takes from the config (a pixel tensor's channels)
SEVERAL = "n"  # 1, or -1 where the model takes several at once (a text entry's TEXT [n], which the door coalesces into)
# The typed settings an entry of each answer reads its parameters with (kit.adapters.settings), which the door reads
# its limits, labels and golden set from; an answer of every tensor by name needs none.
SETTINGS: dict[str, type[Settings]] = {
    "text-score": TextSettings,
    "text-labels": TextSettings,
    "text-embedding": TextSettings,
    "text-ranking": TextSettings,
    "text-entities": TextSettings,
    "image-labels": ImageClassifierSettings,
    "image-lines": PipelineSettings,
    "image-document": PipelineSettings,
    "pixels-classes": PixelClassifierSettings,
}


class ContractError(RuntimeError):
    """A served model does not have the tensors or parameters its route relies on."""


@dataclass(frozen=True)
class Spec:
    """The tensors a route feeds (name -> config data type and dims) and the outputs it reads."""

    inputs: dict[str, tuple[str, tuple[int | None, ...]]]
    outputs: tuple[str, ...]
    output_types: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # a tensor route's answer


TEXT = {"TEXT": ("TYPE_STRING", (SEVERAL,))}
IMAGE = {"IMAGE": ("TYPE_STRING", (1,))}
CHUNKS = ("CHUNK_SCORES", "CHUNK_SPANS")
# The tensors of each answer but TENSORS, whose are the config's own.
ANSWERS = {
    "text-score": Spec(TEXT, ("SCORE", *CHUNKS)),
    "text-labels": Spec(TEXT, ("SCORES", *CHUNKS, "LOGITS")),
    "text-embedding": Spec(TEXT, ("EMBEDDING", "CHUNK_EMBEDDINGS", "CHUNK_SPANS", "TOKENS")),
    "image-labels": Spec(IMAGE, ("SCORES",)),
    "image-lines": Spec(IMAGE, ("TEXTS", "SCORES", "BOXES")),
    "image-document": Spec(IMAGE, ("RESULT",)),
    "pixels-classes": Spec({"INPUT": ("TYPE_FP32", (ANY, -1, -1))}, ("PROBS",)),
    "text-ranking": Spec({"QUERY": ("TYPE_STRING", (1,)), "DOCUMENT": ("TYPE_STRING", (1,))}, ("SCORE", *CHUNKS, "TOKENS")),
    "text-entities": Spec(TEXT, ("ENTITY_LABELS", "ENTITY_SCORES", "ENTITY_SPANS", "ENTITY_WORDS", "CHUNK_SPANS", "TOKENS")),
}
LABELLED = ("text-labels", "image-labels")  # answers by the label names in the config's `labels`


@dataclass(frozen=True)
class Served:
    """One served model as its route sees it."""

    spec: Spec
    settings: Settings | None  # None for a model served by a native backend (no Python parameters)
    batched: bool  # max_batch_size > 0: a request carries a leading batch dimension
    dims: dict[str, tuple[int, ...]]  # each input's dims in the config
    route: str = ""  # the path of its route
    answer: str = TENSORS  # what its route answers (kit.control.specs.DOOR_ANSWERS)
    description: str = ""  # the route's description in the OpenAPI document; unset, the answer's own
    max_batch_size: int = 0
    axes: dict[str, list[str]] = field(default_factory=dict)  # a tensor route: inputs' axes that must agree, by name
    labels: tuple[str, ...] = ()  # a labelled answer: its label names, in its SCORES' order; entities: their types
    dimensions: int = 0  # a text embedding: the length of its EMBEDDING
    schema: dict = field(default_factory=dict)  # a JSON document's answer: its JSON Schema
    image_limits: tuple[int, int] = (0, 0)  # an image's answer: the most bytes and pixels of an encoded image
    tokenizer: str = ""  # a text model's: the model that answers its text's tokens (TEI's /tokenize)

    def datatype(self, name: str) -> str:
        return wire_type(self.spec.inputs[name][0])

    @property
    def outputs(self) -> tuple[str, ...]:
        """The outputs the door asks for: its answer's, and CHUNKS where a request may carry several texts."""
        return (*self.spec.outputs, "CHUNKS") if self.texts_at_once > 1 else self.spec.outputs

    @property
    def images_at_once(self) -> int:
        """How many encoded images one request may carry: an image classifier's entry takes a batch, a row each (its
        answer is a row of SCORES per image); every other image answer, one."""
        return self.max_batch_size if self.answer == "image-labels" and self.batched else 1

    @property
    def texts_at_once(self) -> int:
        """How many texts one request may carry: a text entry whose TEXT is [-1] takes `max_request_texts`; else 1."""
        several = self.dims.get("TEXT") == (-1,) and self.spec.inputs.get("TEXT", ("", ()))[1] == (SEVERAL,)
        return self.settings.max_request_texts if several else 1


@dataclass(frozen=True)
class Contract:
    models: dict[str, Served]
    canary: GoldenSet | None = None  # the golden set of the one text model that carries one
    canary_model: str = ""

    def __contains__(self, model: str) -> bool:
        return model in self.models

    def __getitem__(self, model: str) -> Served:
        return self.models[model]


def fitting(want: int | str | None, have: int) -> bool:
    return want is ANY and have > 0 or want == SEVERAL and have in (1, -1) or want == have


def check_tensors(model: str, spec: Spec, config: mc.ModelConfig) -> dict[str, tuple[int, ...]]:
    inputs = {t.name: t for t in config.input}
    dims = {}
    for name, (datatype, want) in spec.inputs.items():
        tensor = inputs.get(name)
        if tensor is None:
            raise ContractError(f"{model}: the served config has no input {name!r} (it has {sorted(inputs)})")
        have = tuple(tensor.dims)
        kind = mc.DataType.Name(tensor.data_type)
        fits = len(have) == len(want) and all(fitting(w, h) for w, h in zip(want, have))
        if kind != datatype or not fits:
            raise ContractError(f"{model}: input {name} is {kind} {list(have)}; the door sends {datatype} {list(want)}")
        dims[name] = have
    missing = set(spec.outputs) - {t.name for t in config.output}
    if missing:
        raise ContractError(f"{model}: the served config has no output {sorted(missing)}")
    return dims


def contract_from_configs(configs: Mapping[str, mc.ModelConfig]) -> Contract:
    """The routes' view of `configs` (model name -> config), for the models whose config names a route."""
    models = {model: served(model, config) for model, config in configs.items() if parameters(config).get(DOOR_ROUTE)}
    golden = {model: canary_of(model, s) for model, s in models.items() if getattr(s.settings, "canary", "")}
    if len(golden) > 1:
        raise ContractError(f"{', '.join(golden)}: the door runs the golden set of one model; keep `canary_from` on one")
    (canary_model, canary), *_ = [*golden.items(), ("", None)]
    return Contract(models, canary, canary_model)


def served(model: str, config: mc.ModelConfig) -> Served:
    """A model as its route sees it: the tensors of its answer, checked against its config, and its settings."""
    params = parameters(config)
    answer = params.get(DOOR_ANSWER, TENSORS)
    if answer not in DOOR_ANSWERS:
        raise ContractError(f"{model}: {DOOR_ANSWER} {answer!r} is not one of {', '.join(DOOR_ANSWERS)}")
    kind = SETTINGS.get(answer)
    try:
        settings = kind.from_parameters(params) if kind is not None else None
    except SettingsError as exc:
        raise ContractError(f"{model}: {exc}") from None
    if answer != TENSORS and settings is None:
        raise ContractError(f"{model}: no typed settings for its parameters in kit.adapters.settings")
    common = {
        "route": params[DOOR_ROUTE],
        "answer": answer,
        "description": params.get(DOOR_DESCRIPTION, ""),
        "max_batch_size": config.max_batch_size,
        "tokenizer": params.get(DOOR_TOKENIZER, ""),
    }
    batched = config.max_batch_size > 0
    if answer == TENSORS:
        inputs = {t.name: (mc.DataType.Name(t.data_type), tuple(t.dims)) for t in config.input}
        outputs = {t.name: (mc.DataType.Name(t.data_type), tuple(t.dims)) for t in config.output}
        dims = {name: dims for name, (_, dims) in inputs.items()}
        axes = json.loads(params.get(DOOR_AXES) or "{}")
        return Served(Spec(inputs, tuple(outputs), outputs), settings, batched, dims, axes=axes, **common)
    spec = ANSWERS[answer]
    dims = check_tensors(model, spec, config)
    if dims.get("TEXT") == (-1,) and "CHUNKS" not in {t.name for t in config.output}:
        raise ContractError(f"{model}: TEXT takes several texts, but no output CHUNKS says which chunks are whose")
    extra: dict = {}
    if answer in (*LABELLED, "pixels-classes", "text-entities"):  # optional but for a classifier's: classes, entity types
        extra["labels"] = tuple(json.loads(getattr(settings, "labels", "") or "[]"))
        if answer in LABELLED and not extra["labels"]:
            raise ContractError(f"{model}: a classifier's entry names its labels (parameter `labels`)")
    if answer == "text-embedding":
        extra["dimensions"] = next(t.dims[-1] for t in config.output if t.name == "CHUNK_EMBEDDINGS")
    if answer == "image-document":
        extra["schema"] = json.loads(params[DOOR_SCHEMA])
    if spec.inputs is IMAGE:
        extra["image_limits"] = image_limits(model, params)
    return Served(spec, settings, batched, dims, **common, **extra)


def image_limits(model: str, params: dict[str, str]) -> tuple[int, int]:
    """The limits the model holds an encoded image to (its `max_image_bytes` and `max_pixels`), which the route
    checks first, whichever settings the model reads them into."""
    try:
        return int(params["max_image_bytes"]), int(params["max_pixels"])
    except (KeyError, ValueError):
        raise ContractError(f"{model}: an image model's entry states its max_image_bytes and max_pixels") from None


def canary_of(model: str, text_model: Served) -> GoldenSet:
    try:
        return golden_from_parameter(text_model.settings.canary)
    except CanaryError as exc:
        raise ContractError(f"{model}: {exc}") from None


def served_configs(url: str, wait: float, admin_headers: dict | None = None, poll: float = 1.0) -> dict[str, mc.ModelConfig]:
    """The configs of the models Triton at `url` (gRPC) serves with a `door_route`, once it is ready. The model index
    is an admin API: a Triton with an admin key answers it to `admin_headers` alone.

    Waits up to `wait` seconds for readiness: in a pod or compose project the door may start first,
    and Triton's first start can take minutes (TensorRT engines)."""
    client = grpcclient.InferenceServerClient(url)
    try:
        deadline, said = time.monotonic() + wait, 0.0
        while not ready(client):
            if time.monotonic() > deadline:
                raise ContractError(f"Triton at {url} was not ready within {wait:.0f} s")
            if time.monotonic() - said > 30:
                log.info("waiting for Triton at %s to be ready", url)
                said = time.monotonic()
            time.sleep(poll)
        try:
            index = client.get_model_repository_index(headers=admin_headers)
        except InferenceServerException as exc:
            if "restricted" not in (exc.message() or ""):
                raise
            raise ContractError(
                f"Triton at {url} keeps its model index behind its admin key: give the door the key "
                "($DOOR_TRITON_ADMIN_KEY, or --triton-admin-key; kit.server.serve passes it)"
            ) from None
        configs = {}
        for entry in index.models:
            if entry.state == "READY":
                config = client.get_model_config(entry.name).config
                if DOOR_ROUTE in config.parameters:
                    configs[entry.name] = config
        return configs
    finally:
        client.close()


def ready(client) -> bool:
    try:
        return client.is_server_ready()
    except InferenceServerException:
        return False
