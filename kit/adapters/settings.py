"""Typed settings of every Python-backend model, read from its config's `parameters` one way.

Triton hands a model its config as JSON whose parameters are strings. Each model declares a
dataclass here; `from_parameters` converts every field by its type and refuses unknown and
missing keys, so a typo in a config fails when the repository is built (kit.control.repository
parses every model's settings) instead of being ignored at load. A field whose type is itself a
dataclass (a pipeline's own settings) takes its fields from the same flat parameters. Plain
Python: the control plane and the benchmarks read built configs with the same classes.
"""

from __future__ import annotations

import json
import typing
from dataclasses import MISSING, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import TypeVar

from kit.pipelines.batching.merge import POLICIES

S = TypeVar("S", bound="Settings")
TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")
ONNX_PROVIDERS = ("CPUExecutionProvider", "CUDAExecutionProvider", "TensorrtExecutionProvider")
TORCH_DTYPES = ("fp16", "fp32")
TORCH_DEVICES = ("cuda", "cpu")
# The parameters the front door reads from a served config (kit.control.specs' DOOR_*: its route, its answer): the
# model does not, so its settings never hold them.
DOOR_PREFIX = "door_"


class SettingsError(ValueError):
    """A model's parameters do not fit its settings; the message names the model and the key."""


def model_settings(args: dict) -> tuple[dict, dict[str, str], Path]:
    """The model's config, its string parameters and its version folder, from initialize's `args`."""
    config = json.loads(args["model_config"])
    params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
    return config, params, Path(args["model_repository"]) / args["model_version"]


def convert(text: str, kind: object, key: str) -> object:
    try:
        if kind is bool:
            if text.lower() not in TRUE + FALSE:
                raise ValueError(f"not one of {TRUE + FALSE}")
            return text.lower() in TRUE
        if kind == tuple[int, ...]:
            return tuple(int(v) for v in text.split(",") if v.strip())
        return kind(text)  # type: ignore[operator]
    except ValueError as exc:
        raise SettingsError(f"parameter {key}={text!r}: {exc}") from None


def keys(cls: type) -> set[str]:
    """The parameter names a settings dataclass reads, nested dataclasses flattened."""
    hints = typing.get_type_hints(cls)
    return {key for f in fields(cls) for key in (keys(hints[f.name]) if is_dataclass(hints[f.name]) else {f.name})}


def refuse_unknown(kind: type, params: dict) -> None:
    """A parameter the dataclass `kind` does not read is refused, with those it reads: a typo fails the build."""
    unknown = sorted(set(params) - keys(kind))
    if unknown:
        raise SettingsError(f"{kind.__name__}: unknown parameters {unknown} (known: {sorted(keys(kind))})")


def parse(cls: type[S], params: dict[str, str]) -> S:
    hints = typing.get_type_hints(cls)
    values = {}
    for f in fields(cls):
        kind = hints[f.name]
        if is_dataclass(kind):
            values[f.name] = parse(kind, params)
        elif f.name in params:
            values[f.name] = convert(params[f.name], kind, f.name)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise SettingsError(f"{cls.__name__}: parameter {f.name!r} is missing")
    try:
        return cls(**values)
    except SettingsError:
        raise
    except ValueError as exc:  # a pipeline's own settings check their values
        raise SettingsError(f"{cls.__name__}: {exc}") from None


class Settings:
    """Base of every model's settings dataclass."""

    @classmethod
    def from_parameters(cls: type[S], params: dict[str, str]) -> S:
        params = {key: value for key, value in params.items() if not key.startswith(DOOR_PREFIX)}
        refuse_unknown(cls, params)
        return parse(cls, params)

    @classmethod
    def from_args(cls: type[S], args: dict) -> tuple[S, Path]:
        """The settings and version folder of the model Triton is initialising."""
        _, params, version_dir = model_settings(args)
        return cls.from_parameters(params), version_dir

    def to_parameters(self, defaults: bool = False) -> dict[str, str]:
        """The settings as the string parameters of a config, which `from_parameters` reads back: each field that has
        no default or differs from it (every field, with `defaults`), nested settings flattened."""
        return written(self, defaults)

    def with_parameters(self: S, params: dict[str, object]) -> S:
        """These settings with some fields given as a profile gives them (strings, or JSON values), each converted by
        its type; an unknown one is refused."""
        refuse_unknown(type(self), params)
        hints = typing.get_type_hints(type(self))
        values = {key: convert(str(value), hints[key], key) for key, value in params.items()}
        try:
            return replace(self, **values)
        except ValueError as exc:
            raise SettingsError(f"{type(self).__name__}: {exc}") from None


def text_of(value: object) -> str:
    """A value as a parameter string: `convert` reads it back."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


def written(settings: object, defaults: bool = False) -> dict[str, str]:
    out = {}
    for f in fields(settings):
        value = getattr(settings, f.name)
        if is_dataclass(value):
            out |= written(value, defaults)
        elif defaults or f.default is MISSING and f.default_factory is MISSING or value != f.default:
            out[f.name] = text_of(value)
    return out


@dataclass(frozen=True)
class TextSettings(Settings):
    """A text model's entry (a text scorer's, or a text-classification or feature-extraction spec's,
    kit.control.text_task). The task derives `buckets` and `max_batch` once the models are placed: the buckets chosen
    for `bucket_count` from the export's token lengths, and the classifier's max_batch_size, so that a chunk group
    always fits one classifier request. `max_chars` 0 chunks by the model's token limit alone. What the models ignore reaches the
    front door through the served config: `canary` (the export's golden set as JSON, derived from the file
    `canary_from` names, kit.control.canary) and a spec's `labels` (the label names, a JSON list in the
    classifier's column order), and an encoder's `pooling` (mean or cls, as its export pools)."""

    classifier: str
    max_chars: int
    max_text_bytes: int
    bucket_count: int
    buckets: tuple[int, ...] = ()
    max_batch: int = 0
    canary_from: str = ""
    canary: str = ""
    labels: str = ""
    pooling: str = ""
    max_request_texts: int = 256  # texts one request to the entry may carry (a front door's coalesced ones)

    def __post_init__(self) -> None:
        if self.max_chars < 0:
            raise SettingsError(f"max_chars {self.max_chars} is negative; 0 chunks by the model's token limit")
        if self.max_request_texts < 1:
            raise SettingsError(f"max_request_texts {self.max_request_texts}: a request carries at least one text")


@dataclass(frozen=True, kw_only=True)
class TextsSettings(TextSettings):
    """A text model's texts model: the entry's settings (the ensemble in front of it, `parameters_from`, which errors
    name), so that the entry the clients and the door see and the model that does the work read one source.
    `batches_in_flight`: how many of the classifier's full rounds (every instance's max_batch_size) may be in flight
    at once; the task derives `chunks_in_flight` from it, the window the model hands its batches into
    (kit.adapters.handoff). `call_threads`: how many of its classifier calls may wait at
    once (kit.adapters.handoff.Background); 0 keeps asyncio's default, min(32, cores + 4)."""

    parameters_from: str = ""
    batches_in_flight: int
    chunks_in_flight: int = 0
    call_threads: int = 0


@dataclass(frozen=True, kw_only=True)
class RankingSettings(TextsSettings):
    """A text-ranking spec's pairs model (kit.control.ranking_task): a texts model's settings, its documents' chunks
    beside a query, and `aggregation`, how a document's score is made of its chunks' (kit.pipelines.text.pairs)."""

    aggregation: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.aggregation not in ("max", "mean"):
            raise SettingsError(f"aggregation {self.aggregation!r} is neither max nor mean")


@dataclass(frozen=True)
class ImageClassifierSettings(Settings):
    """An image-classification spec's entry and its `NAME_pixels` (kit.control.image_task), which inherits the
    entry's parameters (`parameters_from`): `pixels_model`, the model that decodes and preprocesses; the limits an
    encoded image is held to before it is decoded; `preprocessing`, the pixels model's file of the checkpoint's
    preprocessing (kit.pipelines.image_processing). `labels` (a JSON list in the graph's column order) reaches the
    front door through the entry's config."""

    pixels_model: str
    max_image_bytes: int
    max_pixels: int
    preprocessing: str = ""
    parameters_from: str = ""
    labels: str = ""


PIPELINE_ENGINES = ("bls", "in_process")


@dataclass(frozen=True)
class PipelineSettings(Settings):
    """A pipeline spec's entry (kit.control.pipeline_task, kit/adapters/pipeline_model.py): `pipeline_module`, the
    user's module's file in the version folder (kit.pipelines.custom); `networks`, the builder's JSON of each
    network's model and output names; `network_rows`, the builder's JSON of the most rows each of those models takes
    in one call (its max_batch_size as placed; 0: the tensors whole); `max_rows`, the most rows a network of the
    entry's own process takes in one call (0: as `run` sends them);
    `requests_in_flight`, how many requests may be under way at once, the rest waiting in Triton's queue.
    `engines`: how the entry runs its networks: `bls`, as requests to their models of the server (whose batchers merge
    the calls of concurrent requests: what a GPU wants), or `in_process`, ONNX Runtime sessions of
    `intra_op_threads` in the entry's own process, on the graphs linked into its version folder (no hop: on a few CPU
    cores, where batching buys little, each instance then works as a whole in-process pipeline does).
    `parameters_from`: an entry whose parameters this one takes where it sets none, at build time. Every other
    parameter is the module's own (`module`), read into its SETTINGS (kit.adapters.custom_pipeline)."""

    pipeline_module: str
    networks: str
    max_rows: int
    requests_in_flight: int
    network_rows: str = "{}"
    engines: str = "bls"
    intra_op_threads: int = 1
    parameters_from: str = ""
    module: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.engines not in PIPELINE_ENGINES:
            raise SettingsError(f"engines {self.engines!r} is not one of {PIPELINE_ENGINES}")

    @classmethod
    def from_parameters(cls, params: dict[str, str]) -> PipelineSettings:
        known = keys(cls) - {"module"}
        own = {key: value for key, value in params.items() if key in known}
        module = tuple(sorted((k, v) for k, v in params.items() if k not in known and not k.startswith(DOOR_PREFIX)))
        return replace(parse(cls, own), module=module)

    def to_parameters(self, defaults: bool = False) -> dict[str, str]:
        return written(replace(self, module=()), defaults) | dict(self.module)

    def with_parameters(self, params: dict[str, object]) -> PipelineSettings:
        """Its own fields as any settings take them; every other parameter is the module's."""
        known = {f.name for f in fields(self)} - {"module"}
        own = Settings.with_parameters(self, {key: value for key, value in params.items() if key in known})
        module = dict(self.module) | {key: text_of(value) for key, value in params.items() if key not in known}
        return replace(own, module=tuple(sorted(module.items())))

    def module_settings(self, kind: type | None) -> object:
        """The module's SETTINGS from its parameters (module_settings)."""
        return module_settings(kind, dict(self.module))


def module_settings(kind: type | None, params: dict[str, str]) -> object:
    """A pipeline module's SETTINGS (a dataclass, `kind`) from `params`; None where it declares none (and then takes
    none)."""
    if kind is None:
        if params:
            raise SettingsError(f"parameters {sorted(params)} are the module's, but it declares no SETTINGS")
        return None
    refuse_unknown(kind, params)
    return parse(kind, params)


@dataclass(frozen=True)
class PixelClassifierSettings(Settings):
    """A pixel classifier's entry: it merges the requests of different image sizes into runs of its `backbone` by
    `merge_policy`. The `cost` policy prices runs by `cost_model`, a file of its version folder: the run times its
    export measured, or those a profile links in its place (a device the export did not run on). `labels` (a JSON
    list in the classes' order, where the checkpoint names them) reaches the front door through the entry's
    config."""

    backbone: str
    merge_policy: str
    cost_model: str
    max_image_pixels: int
    labels: str = ""

    def __post_init__(self) -> None:
        if self.merge_policy not in POLICIES:
            raise SettingsError(f"merge_policy {self.merge_policy!r} is not one of {POLICIES}")


def require_cpu_inputs(force_cpu_only_input_tensors: bool) -> None:
    """The runners read inputs with `as_numpy`, which needs them in CPU memory."""
    if not force_cpu_only_input_tensors:
        raise SettingsError("FORCE_CPU_ONLY_INPUT_TENSORS must stay yes: the runners read their inputs as numpy arrays")


@dataclass(frozen=True)
class OnnxRunnerSettings(Settings):
    """The runner of an ONNX model (kit/adapters/onnx_runner_model.py): ONNX Runtime's CPU provider, or
    the CUDA / TensorRT one where onnxruntime-gpu is installed (on the instance's GPU).
    FORCE_CPU_ONLY_INPUT_TENSORS is the Python backend's own parameter (default yes), declared so
    that the check accepts it where a profile states it."""

    onnx_model: str
    intra_op_threads: int
    provider: str = "CPUExecutionProvider"
    FORCE_CPU_ONLY_INPUT_TENSORS: bool = True

    def __post_init__(self) -> None:
        require_cpu_inputs(self.FORCE_CPU_ONLY_INPUT_TENSORS)
        if self.provider not in ONNX_PROVIDERS:
            raise SettingsError(f"provider {self.provider!r} is not one of {ONNX_PROVIDERS}")


@dataclass(frozen=True)
class TorchRunnerSettings(Settings):
    """The PyTorch runner of a checkpoint folder (kit/adapters/torch_runner_model.py, kit.runners.torch). `device` cuda
    means the GPU Triton placed the instance on. `batch_ladder`: the batch sizes a run's rows are padded up to (none:
    each run as it comes); `warm_lengths`: the lengths its callers pad a free axis to (a text model's buckets, which
    the builder writes); with `warm_up`, every ladder size by every length runs once at load, before the model is
    ready, and with `cuda_graphs` (a GPU's) each of those shapes is captured as a CUDA graph while the graphs take at
    most `graph_memory_share` of the memory free after loading. `merge_measured`: requests of different shapes run
    as one padded batch where the warm-up's own times price that cheaper (kit/adapters/runner.py). With
    `profile_executions`, that many executions after the warm-up are recorded by torch.profiler into the folder
    $KIT_TRACE_DIR names. FORCE_CPU_ONLY_INPUT_TENSORS as for
    the ONNX runner: the stub's CUDA runtime and PyTorch's need not match, so inputs cross in CPU memory."""

    torch_model: str
    dtype: str = "fp32"
    device: str = "cpu"
    batch_ladder: tuple[int, ...] = ()
    warm_lengths: tuple[int, ...] = ()
    warm_up: bool = True
    cuda_graphs: bool = False
    graph_memory_share: float = 0.5
    merge_measured: bool = False
    profile_executions: int = 0
    FORCE_CPU_ONLY_INPUT_TENSORS: bool = True

    def __post_init__(self) -> None:
        require_cpu_inputs(self.FORCE_CPU_ONLY_INPUT_TENSORS)
        if self.dtype not in TORCH_DTYPES:
            raise SettingsError(f"dtype {self.dtype!r} is not one of {TORCH_DTYPES}")
        if self.device not in TORCH_DEVICES:
            raise SettingsError(f"device {self.device!r} is not one of {', '.join(TORCH_DEVICES)}")
        if self.cuda_graphs and self.device == "cpu":  # first: a placement's cuda_graphs on the CPU is the mistake to name
            raise SettingsError("cuda_graphs needs device cuda")
        if self.dtype == "fp16" and self.device == "cpu":
            raise SettingsError("dtype fp16 needs device cuda: the runner refuses half precision on the CPU")
        if list(self.batch_ladder) != sorted(set(self.batch_ladder)) or any(size < 1 for size in self.batch_ladder):
            raise SettingsError(f"batch_ladder {list(self.batch_ladder)} is not rising batch sizes of at least 1")
        if not 0 < self.graph_memory_share <= 1:
            raise SettingsError(f"graph_memory_share {self.graph_memory_share} is not a share of the free memory (0, 1]")
        if self.profile_executions < 0:
            raise SettingsError(f"profile_executions {self.profile_executions} is negative")
        if self.merge_measured and not self.warm_up:
            raise SettingsError("merge_measured prices runs by the warm-up's times: it needs warm_up")
