"""Model specs: one short TOML file per model a user brings (`models/<name>.toml`), from which the kit
derives everything else (its Triton config, the door's route, the served checks).

    task = "onnx"                       # what the model does (kit.control.tasks)
    source = "graphs/scorer.onnx"       # relative to the spec's folder, or absolute
    max_batch_size = 32                 # every other key is optional: the task's defaults hold

A spec lists only what differs from its task's defaults. Unknown keys, wrong types and impossible
values are refused when the spec is read, with a message that names the file, the key and the fix, so
a mistake stops `kit add` or the build, never a running server. `kit add` (kit.control.models) writes
a spec; the repository builder (kit.control.repository) serves every spec it finds beside the
committed models.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from kit.adapters.settings import DOOR_PREFIX
from kit.control.configs import REPO_ROOT, RepositoryError
from kit.pipelines.batching.merge import POLICIES as MERGE_POLICIES

MODELS = REPO_ROOT / "models"
NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
ROUTE = re.compile(r"^/v1/[a-z0-9][a-z0-9_/-]*$")
# The door's own routes of OpenAI's API (door.openai_api): no spec's route may take one.
DOOR_OWN_ROUTES = ("/v1/embeddings", "/v1/models", "/v1/rerank")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # a Hugging Face hub id, as `organisation/model`
# Tasks whose source is a checkpoint folder or a hub id, not a file.
CHECKPOINT_TASKS = ("text-classification", "feature-extraction", "text-ranking", "token-classification", "image-classification")
MAX_BATCH = 1024
POOLINGS = ("mean", "cls")
AGGREGATIONS = ("max", "mean")  # text-ranking: a document's score of its chunks' (kit.pipelines.text.pairs)
# image-classification's inputs: an encoded image file, resized by the checkpoint's processor to the graph's one
# size; or normalised pixels of any size, batched across sizes by a merge policy into padded runs of a graph that
# masks the padding (a ResNet's, export.resnet).
IMAGE_INPUTS = ("image", "pixels")
# The config parameters that tell the front door how to serve a model: the path of its route, the answer its route
# gives (one of DOOR_ANSWERS, by what goes in and what comes out; door.contract holds each one's tensors), the
# route's description in the OpenAPI document, and, for a JSON document's answer, that document's JSON Schema.
DOOR_ROUTE = DOOR_PREFIX + "route"
DOOR_ANSWER = DOOR_PREFIX + "answer"
DOOR_DESCRIPTION = DOOR_PREFIX + "description"
DOOR_SCHEMA = DOOR_PREFIX + "schema"
# A text model's entry names the model that answers its text's tokens (a request with the parameter `tokenize`,
# kit.adapters.grouped_calls), for TEI's /tokenize on the door.
DOOR_TOKENIZER = DOOR_PREFIX + "tokenizer"
TENSORS = "tensors"  # every input and output by the model's tensor names: the answer of a config that names none
DOOR_ANSWERS = (
    TENSORS,
    "text-score",
    "text-labels",
    "text-embedding",
    "image-labels",
    "image-lines",
    "image-document",
    "pixels-classes",
    "text-ranking",
    "text-entities",
)
# The config parameter naming each input's free axes (JSON: input -> the graph's axis name or "" per dim), so that
# the door refuses inputs whose shared axis (token ids and their mask along `length`) differ in length.
DOOR_AXES = DOOR_PREFIX + "axes"


class SpecError(RepositoryError):
    """A spec cannot be served as written; the message names the spec, the key and the fix."""


@dataclass(frozen=True)
class ModelSpec:
    """A spec as read: its keys, with the task's defaults where the file is silent."""

    name: str
    path: Path
    task: str
    source: str
    max_batch_size: int = 64
    max_queue_delay_microseconds: int = 1000
    preferred_batch_size: tuple[int, ...] = ()
    instances: int = 1
    queue_timeout_seconds: float = 30.0
    route: str = ""
    max_chars: int = 0  # text tasks: chunks of at most this many characters; 0, the model's token limit
    bucket_count: int = 5  # text tasks: padded lengths chosen from the export's measured chunk lengths
    labels: tuple[str, ...] = ()  # text- and image-classification: names for the checkpoint's labels, in its order
    score_label: str = ""  # text-classification: answer this label's probability alone (a detector's score)
    canary: bool = False  # with score_label: the door runs the export's golden set through the model (one per door)
    description: str = ""  # the door's description of the model's route in the OpenAPI document
    pooling: str = ""  # feature-extraction: mean or cls; unset, as the checkpoint's sentence-transformers files say, else mean
    normalize: bool | None = None  # feature-extraction: L2-normalise embeddings; unset, as those files say, else not
    aggregation: str = "max"  # text-ranking: a long document's score, its chunks' best (max) or length-weighted mean
    stride: int = 0  # token-classification: the tokens two windows of a long text share; 0, a quarter of the model's limit
    input: str = "image"  # image-classification: what a request sends, one of IMAGE_INPUTS
    merge_policy: str = "cost"  # image-classification of pixels: which images of different sizes run together
    max_image_pixels: int = 1 << 20  # image-classification of pixels: the most values an image may have per channel
    num_labels: int = 0  # image-classification: the label count of a shipped spec, which builds before its export
    # pipeline: networks of the module that are models of the repository already (network -> model), not graphs of
    # the spec's own; shared, so that two pipelines' calls meet in one batcher
    networks: tuple[tuple[str, str], ...] = ()
    parameters: tuple[tuple[str, str], ...] = ()  # pipeline: the module's SETTINGS, as the entry's parameters
    parameters_from: str = ""  # pipeline: an entry whose parameters this one takes where it sets none
    door_answer: str = ""  # pipeline: the door's answer (one of DOOR_ANSWERS); unset, every tensor by name
    door_schema: str = ""  # pipeline with door_answer image-document: the document's JSON Schema file
    requests_in_flight: int = 0  # pipeline: requests an entry instance runs at once; 0, the task's default
    # pipeline: export files the entry's folder takes beside the module's FILES (name -> path, as `source` is)
    files: tuple[tuple[str, str], ...] = ()
    max_queue_size: int = 0  # a batching model's queue: 0, four full batches; N, N requests
    door: bool = True  # onnx: the door serves a route for the graph; false for a network only pipelines call
    given: frozenset[str] = frozenset()  # the keys the file sets (a task may keep its own default for the others)
    # A spec the kit ships (model_repository/*.toml): its export is `make export`'s, in this artifacts folder, and its
    # `source` (and `files`) name that export's files there.
    artifacts: Path | None = None

    @property
    def shipped(self) -> bool:
        return self.artifacts is not None

    @property
    def source_path(self) -> Path:
        """The source; a pipeline's is its module, code that lives beside its spec even when the kit ships it."""
        return self.path_of(self.source, beside=self.task == "pipeline")

    def path_of(self, name: str, beside: bool = False) -> Path:
        """A path the spec names: in the artifacts folder for a shipped spec (unless `beside`), else relative to the
        spec's folder."""
        path = Path(name).expanduser()
        folder = self.artifacts if self.artifacts is not None and not beside else self.path.parent
        return path if path.is_absolute() else (folder / path).resolve()

    @property
    def schema_path(self) -> Path:
        return (self.path.parent / self.door_schema).resolve()

    @property
    def hub_id(self) -> bool:
        """The source names a checkpoint on the Hugging Face hub (loaded by the export where the hub is reachable)."""
        return self.task in CHECKPOINT_TASKS and bool(HUB_ID.match(self.source)) and not self.source_path.exists()

    @property
    def door_route(self) -> str:
        return self.route or "/v1/" + self.name.replace("_", "-")

    def error(self, key: str, problem: str, fix: str) -> SpecError:
        return spec_error(self.path, key, problem, fix)


KEYS = {f.name: f for f in fields(ModelSpec) if f.name not in ("name", "path", "given", "artifacts")}
REQUIRED = ("task", "source")
# The tasks (kit.control.tasks plans each), and the keys only some tasks read: a spec of another task that sets one is
# refused rather than silently ignored.
TASK_KEYS = {
    "onnx": frozenset({"door"}),
    "text-classification": frozenset({"max_chars", "bucket_count", "labels", "score_label", "canary"}),
    "feature-extraction": frozenset({"max_chars", "bucket_count", "pooling", "normalize"}),
    "text-ranking": frozenset({"max_chars", "bucket_count", "aggregation"}),
    "token-classification": frozenset({"bucket_count", "stride"}),
    "image-classification": frozenset({"labels", "input", "merge_policy", "max_image_pixels", "num_labels"}),
    "pipeline": frozenset(
        {"networks", "parameters", "parameters_from", "door_answer", "door_schema", "requests_in_flight", "files"}
    ),
}


def spec_error(path: Path, key: str, problem: str, fix: str) -> SpecError:
    return SpecError(f"{path}: `{key}` {problem}; {fix}")


# Each key's type as TOML spells it, and how the error says it.
TYPES = {
    "str": ((str,), "a string"),
    "int": ((int,), "a whole number"),
    "float": ((int, float), "a number"),
    "tuple[int, ...]": ((list,), "a list of whole numbers"),
    "tuple[str, ...]": ((list,), "a list of strings"),
    "bool | None": ((bool,), "true or false"),
    "bool": ((bool,), "true or false"),
    "tuple[tuple[str, str], ...]": ((dict,), "a table of names to strings, numbers or true/false"),
}
TABLE_VALUES = (str, int, float, bool)


def typed(path: Path, key: str, value: object) -> object:
    """`value` as the key's type, or a SpecError saying which type the key takes."""
    kind = KEYS[key].type
    accepted, words = TYPES[kind]
    if kind.startswith("tuple[tuple"):
        if not isinstance(value, dict) or not all(isinstance(v, TABLE_VALUES) for v in value.values()):
            raise spec_error(path, key, f"is {json.dumps(value)}", f"it takes {words}")
        return tuple(sorted((k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()))
    items = value if isinstance(value, list) else [value]
    wrong = isinstance(value, bool) != kind.startswith("bool") or not isinstance(value, accepted)
    item_type = str if kind == "tuple[str, ...]" else int
    if wrong or kind.startswith("tuple") and not all(isinstance(v, item_type) and not isinstance(v, bool) for v in items):
        raise spec_error(path, key, f"is {json.dumps(value)}", f"it takes {words}")
    if kind.startswith("tuple"):
        return tuple(value)
    return float(value) if kind == "float" else value


def read_spec(path: Path, text: str | None = None, artifacts: Path | None = None) -> ModelSpec:
    """The spec in `path` (or `text`, the spec `path` is about to hold), checked; SpecError when it does not fit."""
    name = path.stem
    if not NAME.match(name):
        raise SpecError(f"{path}: the model name {name!r} (the file's name) must be lower-case letters, digits and _")
    try:
        raw = tomllib.loads(path.read_text() if text is None else text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not TOML ({exc}); see docs/MODELS.md for the format") from None
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise spec_error(path, unknown[0], "is not a spec key", f"the keys are {', '.join(KEYS)} (docs/MODELS.md)")
    for key in REQUIRED:
        if key not in raw:
            raise spec_error(path, key, "is missing", f"every spec names its {key} (docs/MODELS.md)")
    typed_keys = {key: typed(path, key, value) for key, value in raw.items()}
    spec = ModelSpec(name=name, path=path, given=frozenset(raw), artifacts=artifacts, **typed_keys)
    if spec.task not in TASK_KEYS:
        raise spec_error(path, "task", f"is {spec.task!r}, which the kit does not know", f"the tasks are {', '.join(TASK_KEYS)}")
    for key in sorted(set(raw) - set(REQUIRED)):
        tasks = [task for task, keys in TASK_KEYS.items() if key in keys]
        if tasks and spec.task not in tasks:
            raise spec_error(path, key, f"is not a key of the {spec.task} task", f"it is for {', '.join(tasks)}")
    check_values(spec)
    return spec


def check_values(spec: ModelSpec) -> None:
    if spec.shipped:
        pass  # its export is `make export`'s: the build finds its files in the artifacts folder, or says to export
    elif spec.task in CHECKPOINT_TASKS:
        if not spec.hub_id and not (spec.source_path / "config.json").is_file():
            raise spec.error(
                "source", f"names {spec.source_path}, which is not a checkpoint folder", "point it at a folder with config.json"
            )
    elif not spec.source_path.is_file():
        raise spec.error("source", f"names {spec.source_path}, which is not a file", "point it at the model's file")
    if not 0 <= spec.max_batch_size <= MAX_BATCH:
        raise spec.error("max_batch_size", f"is {spec.max_batch_size}", f"it takes 0 (no batching) to {MAX_BATCH}")
    if spec.task == "image-classification" and spec.max_batch_size == 0:
        raise spec.error("max_batch_size", "is 0", "an image classifier batches the images of concurrent requests: 1 or more")
    if spec.max_queue_size < 0:
        raise spec.error("max_queue_size", "is negative", "0 keeps four full batches waiting; N keeps N requests")
    if spec.max_queue_delay_microseconds < 0:
        raise spec.error("max_queue_delay_microseconds", "is negative", "0 sends what is waiting at once")
    too_large = [b for b in spec.preferred_batch_size if not 1 <= b <= spec.max_batch_size]
    if too_large:
        raise spec.error(
            "preferred_batch_size", f"holds {too_large}", f"each lies in 1 .. max_batch_size ({spec.max_batch_size})"
        )
    if spec.instances < 1:
        raise spec.error("instances", f"is {spec.instances}", "a model runs at least one instance")
    if spec.queue_timeout_seconds <= 0:
        raise spec.error("queue_timeout_seconds", "is not positive", "a request waits this long at most before it is refused")
    if spec.max_chars < 0:
        raise spec.error("max_chars", "is negative", "0 chunks by the model's token limit, N by N characters")
    if spec.bucket_count < 1:
        raise spec.error("bucket_count", f"is {spec.bucket_count}", "a model pads its chunks to at least one length")
    if spec.canary and not spec.score_label:
        raise spec.error("canary", "is true without a score_label", "the golden set is one label's probabilities: name it")
    if spec.input not in IMAGE_INPUTS:
        raise spec.error("input", f"is {spec.input!r}", f"it is one of {', '.join(IMAGE_INPUTS)}")
    pixel_keys = sorted({"merge_policy", "max_image_pixels"} & spec.given)
    if pixel_keys and spec.input != "pixels":
        raise spec.error(pixel_keys[0], "is for images sent as pixels", 'set input = "pixels", or drop it')
    if spec.merge_policy not in MERGE_POLICIES:
        raise spec.error("merge_policy", f"is {spec.merge_policy!r}", f"it is one of {', '.join(MERGE_POLICIES)}")
    if spec.max_image_pixels < 1:
        raise spec.error("max_image_pixels", f"is {spec.max_image_pixels}", "an image has at least one pixel")
    if spec.num_labels < 0:
        raise spec.error("num_labels", "is negative", "a classifier has at least one label")
    if spec.stride < 0:
        raise spec.error("stride", "is negative", "0 shares a quarter of the model's token limit; N shares N tokens")
    if spec.aggregation not in AGGREGATIONS:
        raise spec.error("aggregation", f"is {spec.aggregation!r}", f"it is one of {', '.join(AGGREGATIONS)}")
    if spec.pooling and spec.pooling not in POOLINGS:
        raise spec.error("pooling", f"is {spec.pooling!r}", f"it is one of {', '.join(POOLINGS)}")
    if spec.requests_in_flight < 0:
        raise spec.error("requests_in_flight", "is negative", "0 takes the task's default; N runs N requests at once")
    if spec.door_answer and spec.door_answer not in DOOR_ANSWERS:
        raise spec.error("door_answer", f"is {spec.door_answer!r}", f"it is one of {', '.join(DOOR_ANSWERS)}")
    if (spec.door_answer == "image-document") != bool(spec.door_schema):
        raise spec.error("door_schema", "goes with door_answer image-document", "give both, or neither")
    if spec.door_schema and not spec.schema_path.is_file():
        raise spec.error("door_schema", f"names {spec.schema_path}, which is not a file", "point it at a JSON Schema file")
    if not ROUTE.match(spec.door_route):
        raise spec.error("route", f"is {spec.door_route!r}", "the door's paths look like /v1/my-model")
    if spec.door_route in DOOR_OWN_ROUTES:
        raise spec.error("route", f"is {spec.door_route}, a route of OpenAI's API on the door", "give the spec a `route`")


def read_specs(folder: Path = MODELS, artifacts: Path | None = None) -> dict[str, ModelSpec]:
    """Every spec in `folder` by model name (none when there is no such folder); with `artifacts`, the kit's own in a
    model repository's sources, their exports in that folder."""
    paths = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    specs = {spec.name: spec for spec in (read_spec(p, artifacts=artifacts) for p in paths)}
    check_routes(specs)
    return specs


def readable_specs(folder: Path, artifacts: Path | None = None) -> dict[str, ModelSpec]:
    """The specs in `folder` that read, by name: where a spec's check looks at those beside it, a broken one is its
    own build's matter."""
    specs = {}
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            specs[path.stem] = read_spec(path, artifacts=artifacts)
        except RepositoryError:
            continue
    return specs


def door_parameters(spec: ModelSpec, answer: str = "") -> dict[str, str]:
    """What the door reads from the config of the spec's entry: its route, its answer (every tensor by name, unless
    one is named) and the route's description where the spec gives one."""
    answer = {DOOR_ANSWER: answer} if answer else {}
    described = {DOOR_DESCRIPTION: spec.description} if spec.description else {}
    return {DOOR_ROUTE: spec.door_route} | answer | described


def check_routes(specs: dict[str, ModelSpec]) -> None:
    """Each spec has a door route of its own."""
    routes: dict[str, str] = {}
    for spec in specs.values():
        other = routes.setdefault(spec.door_route, spec.name)
        if other != spec.name:
            raise spec.error("route", f"{spec.door_route} is also {other}'s", "give one of them its own `route`")


def toml_value(value: object) -> str:
    """`value` as TOML writes it: JSON's spelling, but a table inline as {key = value, ...}."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def spec_text(task: str, source: str, settings: dict[str, object]) -> str:
    """A spec file's text: the task, the source and the settings that differ from the defaults."""
    lines = [f"task = {json.dumps(task)}", f"source = {json.dumps(source)}"]
    lines += [f"{key} = {toml_value(value)}" for key, value in settings.items() if value != KEYS[key].default]
    return "\n".join(lines) + "\n"
