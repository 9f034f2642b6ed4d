"""What the door may send each model, and the limits it holds requests to, read from the configs
Triton serves: one source with the models, not a second hand-kept copy.

Each route names the tensors it feeds and reads (SPECS); at start the door asks Triton for the config
of every model it has a route for, checks those tensors against it (a renamed tensor stops the door
instead of failing every request), and parses the config's parameters with the model's own typed
settings (kit.adapters.settings), the class its model.py reads them with: RADAR's max_text_bytes,
OCR's max_image_bytes and max_pixels, ResNet's max_image_pixels and its channel count, and the
golden set of the served-numerics canary that the build put on `radar` (kit.control.canary). A model
the server does not serve gets no route. A model from a user's spec (kit.control.specs) names its
route in its config (`door_route`); its tensors, whatever they are, are its route's (door.routes'
tensor route). The same function reads the configs a build writes (kit.control.repository.resolved),
which is how the unit tests hold it to the committed sources.
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

from kit.adapters.settings import ImageClassifierSettings, RadarSettings, Settings, SettingsError, settings_class
from kit.control.canary import CanaryError, GoldenSet, golden_from_parameter
from kit.control.configs import parameters, wire_type
from kit.control.specs import DOOR_AXES, DOOR_ROUTE

log = logging.getLogger("door")

ANY = None  # a dimension the route takes from the config (ResNet's channels)


class ContractError(RuntimeError):
    """A served model does not have the tensors or parameters its route relies on."""


@dataclass(frozen=True)
class Spec:
    """The tensors a route feeds (name -> config data type and dims) and the outputs it reads."""

    inputs: dict[str, tuple[str, tuple[int | None, ...]]]
    outputs: tuple[str, ...]
    output_types: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # a tensor route's answer


SPECS = {
    "radar": Spec({"TEXT": ("TYPE_STRING", (1,))}, ("SCORE", "CHUNK_SCORES", "CHUNK_SPANS")),
    "ocr": Spec({"IMAGE": ("TYPE_STRING", (1,))}, ("TEXTS", "SCORES", "BOXES")),
    "health_code": Spec({"IMAGE": ("TYPE_STRING", (1,))}, ("RESULT",)),
    "resnet50": Spec({"INPUT": ("TYPE_FP32", (ANY, -1, -1))}, ("PROBS",)),
}


@dataclass(frozen=True)
class Served:
    """One served model as its route sees it."""

    spec: Spec
    settings: Settings | None  # None for a spec's model served by a native backend (no Python parameters)
    batched: bool  # max_batch_size > 0: a request carries a leading batch dimension
    dims: dict[str, tuple[int, ...]]  # each input's dims in the config
    route: str = ""  # a spec's model: the path of its tensor route
    max_batch_size: int = 0
    axes: dict[str, list[str]] = field(default_factory=dict)  # a spec's model: inputs' axes that must agree, by name
    labels: tuple[str, ...] = ()  # a text- or image-classification spec's model: its label names, in its SCORES' order
    dimensions: int = 0  # a feature-extraction spec's model: the length of its EMBEDDING

    def datatype(self, name: str) -> str:
        return wire_type(self.spec.inputs[name][0])


@dataclass(frozen=True)
class Contract:
    models: dict[str, Served]
    canary: GoldenSet | None = None  # radar's golden set, where the served radar carries one

    def __contains__(self, model: str) -> bool:
        return model in self.models

    def __getitem__(self, model: str) -> Served:
        return self.models[model]


def check_tensors(model: str, spec: Spec, config: mc.ModelConfig) -> dict[str, tuple[int, ...]]:
    inputs = {t.name: t for t in config.input}
    dims = {}
    for name, (datatype, want) in spec.inputs.items():
        tensor = inputs.get(name)
        if tensor is None:
            raise ContractError(f"{model}: the served config has no input {name!r} (it has {sorted(inputs)})")
        have = tuple(tensor.dims)
        kind = mc.DataType.Name(tensor.data_type)
        fits = len(have) == len(want) and all(w is ANY and h > 0 or w == h for w, h in zip(want, have))
        if kind != datatype or not fits:
            raise ContractError(f"{model}: input {name} is {kind} {list(have)}; the door sends {datatype} {list(want)}")
        dims[name] = have
    missing = set(spec.outputs) - {t.name for t in config.output}
    if missing:
        raise ContractError(f"{model}: the served config has no output {sorted(missing)}")
    return dims


def contract_from_configs(configs: Mapping[str, mc.ModelConfig]) -> Contract:
    """The routes' view of `configs` (model name -> config), for the models the door has a route for."""
    models = {}
    for model, spec in SPECS.items():
        config = configs.get(model)
        if config is None:
            continue
        dims = check_tensors(model, spec, config)
        params = parameters(config)
        kind = settings_class(model, params)
        if kind is None:
            raise ContractError(f"{model}: no typed settings for its parameters in kit.adapters.settings")
        try:
            settings = kind.from_parameters(params)
        except SettingsError as exc:
            raise ContractError(f"{model}: {exc}") from None
        models[model] = Served(spec, settings, config.max_batch_size > 0, dims)
    for model, config in configs.items():
        route = parameters(config).get(DOOR_ROUTE)
        if model not in SPECS and route:
            models[model] = brought(model, route, config)
    return Contract(models, canary_of(models.get("radar")))


def brought(model: str, route: str, config: mc.ModelConfig) -> Served:
    """A spec's model as its route sees it: a text model (its entry carries RadarSettings) by its text, and its labels
    (a classifier) or its embedding's dimensions (an encoder); an image classifier by its image and labels; any other
    by every input and output of its config."""
    inputs = {t.name: (mc.DataType.Name(t.data_type), tuple(t.dims)) for t in config.input}
    outputs = {t.name: (mc.DataType.Name(t.data_type), tuple(t.dims)) for t in config.output}
    spec = Spec(inputs, tuple(outputs), outputs)
    params = parameters(config)
    kind = settings_class(model, params)
    try:
        settings = kind.from_parameters(params) if kind is not None else None
    except SettingsError as exc:
        raise ContractError(f"{model}: {exc}") from None
    if isinstance(settings, ImageClassifierSettings):
        spec = Spec({"IMAGE": ("TYPE_STRING", (1,))}, ("SCORES",))
        dims = check_tensors(model, spec, config)
        return Served(spec, settings, config.max_batch_size > 0, dims, route, labels=tuple(json.loads(settings.labels)))
    if isinstance(settings, RadarSettings) and "EMBEDDING" in outputs:
        spec = Spec({"TEXT": ("TYPE_STRING", (1,))}, ("EMBEDDING", "CHUNK_EMBEDDINGS", "CHUNK_SPANS"))
        dims = check_tensors(model, spec, config)
        width = outputs["EMBEDDING"][1][0]
        return Served(spec, settings, config.max_batch_size > 0, dims, route, dimensions=width)
    if isinstance(settings, RadarSettings):
        labels = tuple(json.loads(settings.labels or "[]"))
        spec = Spec({"TEXT": ("TYPE_STRING", (1,))}, ("SCORES", "CHUNK_SCORES", "CHUNK_SPANS"))
        dims = check_tensors(model, spec, config)
        if not labels:
            raise ContractError(f"{model}: a text classifier's entry names its labels (parameter `labels`)")
        return Served(spec, settings, config.max_batch_size > 0, dims, route, labels=labels)
    dims = {name: dims for name, (_, dims) in inputs.items()}
    axes = json.loads(params.get(DOOR_AXES) or "{}")
    return Served(spec, settings, config.max_batch_size > 0, dims, route, config.max_batch_size, axes)


def canary_of(radar: Served | None) -> GoldenSet | None:
    if radar is None or not isinstance(radar.settings, RadarSettings) or not radar.settings.canary:
        return None
    try:
        return golden_from_parameter(radar.settings.canary)
    except CanaryError as exc:
        raise ContractError(f"radar: {exc}") from None


def served_configs(url: str, wait: float, poll: float = 1.0) -> dict[str, mc.ModelConfig]:
    """The configs of the models Triton at `url` (gRPC) serves among SPECS, and of those with a `door_route`, once
    it is ready.

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
        configs = {}
        for model in SPECS:
            try:
                configs[model] = client.get_model_config(model).config
            except InferenceServerException as exc:
                if "not found" not in (exc.message() or "").lower():
                    raise ContractError(f"{model}: {exc.message()}") from None
        for entry in client.get_model_repository_index().models:
            if entry.name not in configs and entry.state == "READY":
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
