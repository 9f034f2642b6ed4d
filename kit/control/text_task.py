"""The text tasks: `text-classification`, any Hugging Face sequence classifier (a checkpoint folder or a hub id), and
`feature-extraction`, any encoder as a sentence embedder, both served as RADAR is (a spec too), from the templates in
templates/text.

A spec `NAME` becomes three models: the entry ensemble `NAME` (what the door and clients call), `NAME_texts` (the
text classifier adapter, kit/adapters/text_classifier_model.py: chunks, length buckets, chunks of many texts merged
into classifier requests) and `NAME_classifier` (`NAME_encoder` for an embedder: the exported graph, placed by the
profile's `text-graph` role). docs/MODELS.md says what each entry answers. The ranking and token tasks share this
module's chain of three models (`TextChain`, `chain_configs`, `place`).

The export (export.text_model, run by kit.control.exports at `kit add` and again whenever the checkpoint or the spec's
chunking changed since) checks the graph against PyTorch and measures the chunk lengths the buckets are chosen from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.artifacts import export_labels
from kit.adapters.settings import TextSettings, TextsSettings
from kit.control import exports
from kit.control.canary import CanaryError, golden_set
from kit.control.configs import RepositoryError, instance_count, set_parameter, set_parameters, template
from kit.control.exports import Exporter, export_dir
from kit.control.profiles import Profile
from kit.control.served import ServedModel, adapter
from kit.control.specs import DOOR_DESCRIPTION, DOOR_TOKENIZER, ModelSpec, door_parameters
from kit.pipelines.text.pipeline import length_buckets

CLASSIFIER_KEYS = ("max_batch_size", "preferred_batch_size", "max_queue_delay_microseconds", "instances")
# The graphs, engine and checkpoint a profile's runner may serve, where the export (or export.tensorrt) wrote them.
CLASSIFIER_FILES = (
    "model.onnx",
    "model.onnx.data",
    "model.cpu.onnx",
    "model.fused.onnx",
    "model.fused.onnx.data",
    "model.int8.onnx",
    "model.int8.onnx.data",
    "model.plan",
    "checkpoint",
)
TEXT_FILES = ("tokenizer.json", "export.json", "token_lengths.json")
ENTRY_FILES = ("export.json", "token_lengths.json")
TOKEN_LENGTHS = "token_lengths.json"
CANARY_FROM = "export.json"  # the export's file whose `canary` section is the door's golden set
MAX_TEXT_BYTES = 1 << 20  # the longest text a request may carry
BATCHES_IN_FLIGHT = 4  # the classifier's full rounds of chunks a texts model keeps in flight, unless placed otherwise
TEXTS_ADAPTER = adapter("text_classifier_model")


CLASSIFICATION, FEATURE_EXTRACTION = "text-classification", "feature-extraction"
# The entry's outputs by task: the text's value, each chunk's (and CHUNK_SPANS); the adapter answers what they name.
ANSWERS = {CLASSIFICATION: ("SCORES", "CHUNK_SCORES"), FEATURE_EXTRACTION: ("EMBEDDING", "CHUNK_EMBEDDINGS")}
GRAPH_SUFFIX = {CLASSIFICATION: "_classifier", FEATURE_EXTRACTION: "_encoder"}
WHAT = {CLASSIFICATION: "a sequence classifier", FEATURE_EXTRACTION: "a text encoder"}


def names(spec: ModelSpec) -> dict[str, str]:
    return {"entry": spec.name, "texts": f"{spec.name}_texts", "classifier": spec.name + GRAPH_SUFFIX[spec.task]}


def text_options(spec: ModelSpec) -> list[str]:
    options = ["--max-chars", str(spec.max_chars), "--task", spec.task]
    options += ["--ai-label-index", str(score_index(spec))] if spec.score_label else []
    options += ["--pooling", spec.pooling] if spec.pooling else []
    return options + ([] if spec.normalize is None else ["--normalize" if spec.normalize else "--no-normalize"])


def text_depends(spec: ModelSpec) -> dict:
    embedding = {"task": spec.task, "pooling": spec.pooling, "normalize": spec.normalize}
    scored = {"score_label": spec.score_label} if spec.score_label else {}  # the golden set is that label's
    return {"max_chars": spec.max_chars} | (embedding if spec.task == FEATURE_EXTRACTION else {}) | scored


EXPORTERS = {task: Exporter("export.text_model", text_options, text_depends, what) for task, what in WHAT.items()}


def require_label_count(spec: ModelSpec, count: int) -> None:
    """The spec's `labels`, where it names any, one per label of the checkpoint's `count`."""
    if spec.labels and len(spec.labels) != count:
        raise spec.error("labels", f"names {len(spec.labels)} labels; the checkpoint has {count}", "name each label once")


def checkpoint_config(spec: ModelSpec) -> dict:
    """The config.json of the spec's checkpoint folder."""
    try:
        return json.loads((spec.source_path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise spec.error("source", f"has no readable config.json ({exc})", "point it at a saved checkpoint") from None


def check_label_count(spec: ModelSpec) -> None:
    """The spec's `labels` against the checkpoint's config, before any export: a count that disagrees stops here."""
    if not spec.labels or spec.hub_id or spec.shipped or spec.task != CLASSIFICATION:
        return
    config = checkpoint_config(spec)
    require_label_count(spec, len(config.get("id2label") or {}) or int(config.get("num_labels", 2)))


def score_index(spec: ModelSpec) -> int:
    """The column of the spec's `score_label`, among its `labels`, else among the checkpoint's id2label: known before
    the export, which computes the golden set for that label."""
    if spec.labels:
        label_names = list(spec.labels)
    elif spec.hub_id:
        raise spec.error("score_label", "names a label of a hub checkpoint", "name its labels in order with `labels` too")
    else:
        id2label = checkpoint_config(spec).get("id2label") or {}
        label_names = [id2label[str(index)] for index in range(len(id2label))]
    if spec.score_label not in label_names:
        raise spec.error(
            "score_label", f"is {spec.score_label!r}, not a label of the checkpoint", f"it is one of {', '.join(label_names)}"
        )
    return label_names.index(spec.score_label)


def checkpoint_labels(spec: ModelSpec, meta: dict) -> list[str]:
    """A classifier's label names in its columns' order (a text or an image one): the spec's, else the checkpoint's
    id2label, as its export.json `meta` holds them."""
    require_label_count(spec, int(meta["num_labels"]))
    return list(spec.labels) or export_labels(meta)


def labels(spec: ModelSpec, meta: dict) -> list[str]:
    """The label names in the classifier's column order; none for an encoder."""
    return checkpoint_labels(spec, meta) if spec.task == CLASSIFICATION else []


def answer_outputs(config: mc.ModelConfig, task: str, count: int) -> None:
    """The text's value and each chunk's (every label's probability, or the embedding), in place of one label's; the
    spans, the token count and the chunk count as the template's; a classifier's logits for the text too (LOGITS: its
    chunks', weighted by length), which TEI's raw scores are."""
    text, chunks = ANSWERS[task]
    del config.output[:]
    # [-1]: a request of n texts answers n x `count` values, the texts' one after another (the entry's docs).
    config.output.add(name=text, data_type=mc.TYPE_FP32, dims=[-1])
    config.output.add(name=chunks, data_type=mc.TYPE_FP32, dims=[-1, count])
    config.output.add(name="CHUNK_SPANS", data_type=mc.TYPE_INT32, dims=[-1, 2])
    config.output.add(name="TOKENS", data_type=mc.TYPE_INT32, dims=[-1])
    config.output.add(name="CHUNKS", data_type=mc.TYPE_INT32, dims=[-1])
    if task == CLASSIFICATION:
        config.output.add(name="LOGITS", data_type=mc.TYPE_FP32, dims=[-1])


def shipped_meta(spec: ModelSpec) -> dict:
    """What the configs of a shipped spec take from its export, from the spec itself: a shipped model builds before
    `make export` writes its export (its labels name the classifier's columns; its graph answers logits)."""
    if spec.task != CLASSIFICATION or not spec.labels:
        raise spec.error("labels", "is missing from a shipped spec", "a shipped text classifier names its labels in order")
    return {"num_labels": len(spec.labels), "id2label": dict(enumerate(spec.labels)), "outputs": ["logits"]}


def canonical(spec: ModelSpec, meta: dict, chain: TextChain) -> dict[str, mc.ModelConfig]:
    """Each model's config as the templates and the spec make it, before any profile places it."""
    count = int(meta["dimensions"] if spec.task == FEATURE_EXTRACTION else meta["num_labels"])  # the graph's output width
    answer = "text-embedding" if spec.task == FEATURE_EXTRACTION else "text-score" if spec.score_label else "text-labels"
    # The template's answer: one label's probability, SCORE [1] and CHUNK_SCORES [-1]; else each label's, or the embedding.
    configs = chain_configs(spec, chain, "text/texts", answer, None if spec.score_label else count)
    if spec.score_label:
        doc = f"{spec.name}: the probability of {spec.score_label} for a text, and for each chunk it was split into"
        set_parameter(configs[chain.entry], DOOR_DESCRIPTION, spec.description or doc + " (a list for `texts`).")
    configs[chain.graph].output[0].name = meta["outputs"][0]
    configs[chain.graph].output[0].dims[:] = [count]
    return configs


def spec_batching(spec: ModelSpec, graph: mc.ModelConfig, texts: mc.ModelConfig) -> None:
    """The batching the spec sets itself on its graph's config (batch cap, queue delay, preferred sizes) and on the
    queue of the model that feeds it (both queues' timeout)."""
    if "max_batch_size" in spec.given:
        graph.max_batch_size = spec.max_batch_size
        graph.dynamic_batching.preferred_batch_size[:] = [b for b in spec.preferred_batch_size if b <= spec.max_batch_size]
    if "max_queue_delay_microseconds" in spec.given:
        graph.dynamic_batching.max_queue_delay_microseconds = spec.max_queue_delay_microseconds
    if "queue_timeout_seconds" in spec.given:
        timeout = int(spec.queue_timeout_seconds * 1e6)
        texts.dynamic_batching.default_queue_policy.default_timeout_microseconds = timeout
        graph.dynamic_batching.default_queue_policy.default_timeout_microseconds = timeout


def chain_configs(
    spec: ModelSpec, chain: TextChain, texts_template: str, answer: str, width: int | None = None
) -> dict[str, mc.ModelConfig]:
    """A text task's configs, from its templates (`texts_template`'s folder) and the text classifier's graph template:
    the entry's door parameters and step, the answer outputs of `width` values a text (`answer_outputs`, where given)
    on the entry and the texts model, the texts model's tokenizer outputs, the spec's batching."""
    entry = template(f"{texts_template.split('/')[0]}/entry", chain.entry)
    set_parameters(entry, door_parameters(spec, answer))
    step = entry.ensemble_scheduling.step[0]
    step.model_name = chain.texts
    texts = template(texts_template, chain.texts)
    if width is not None:
        for config in (entry, texts):
            answer_outputs(config, spec.task, width)
        step.output_map.clear()
        step.output_map.update({tensor.name: tensor.name for tensor in entry.output})
    # The texts model answers a text's tokens (kit.adapters.grouped_calls: a request with the parameter `tokenize`);
    # the entry names it for the door (TEI's /tokenize).
    texts.output.add(name="TOKENIZED_IDS", data_type=mc.TYPE_INT32, dims=[-1])
    texts.output.add(name="TOKENIZED_TEXTS", data_type=mc.TYPE_STRING, dims=[-1])
    texts.output.add(name="TOKENIZED_SPANS", data_type=mc.TYPE_INT32, dims=[-1, 2])
    set_parameter(entry, DOOR_TOKENIZER, texts.name)
    graph = template("text/classifier", chain.graph)
    spec_batching(spec, graph, texts)
    return {chain.entry: entry, chain.texts: texts, chain.graph: graph}


def plan(spec: ModelSpec, profile: Profile) -> list[ServedModel]:
    """The entry, its texts model and its graph, placed (see `place`)."""
    check_label_count(spec)
    meta = shipped_meta(spec) if spec.shipped else exports.export(spec, EXPORTERS[spec.task])
    chain = TextChain(*names(spec).values(), TEXTS_ADAPTER)
    label_names = labels(spec, meta)
    entry = entry_settings(
        spec,
        chain,
        canary_from=CANARY_FROM if spec.canary else "",
        labels="" if spec.score_label or not label_names else json.dumps(label_names, ensure_ascii=False),
        pooling=meta["pooling"] if spec.task == FEATURE_EXTRACTION else "",  # what the door tells a TEI client
    )
    return place(spec, profile, chain, canonical(spec, meta, chain), entry)


@dataclass(frozen=True)
class TextChain:
    """A text task's three models, the entry calling the texts model calling the graph, the adapter the texts model
    runs (a text classifier's, a ranker's of query-document pairs or a token classifier's), and the export's files
    the graph's profile may serve."""

    entry: str
    texts: str
    graph: str
    adapter: Path
    graph_files: tuple[str, ...] = CLASSIFIER_FILES


def entry_settings(spec: ModelSpec, chain: TextChain, **own: str) -> TextSettings:
    """The entry's settings as the spec gives them, with what its task adds (`own`: labels, the canary's file, ...)."""
    return TextSettings(
        classifier=chain.graph, max_chars=spec.max_chars, max_text_bytes=MAX_TEXT_BYTES, bucket_count=spec.bucket_count, **own
    )


def place(
    spec: ModelSpec,
    profile: Profile,
    chain: TextChain,
    configs: dict[str, mc.ModelConfig],
    settings: TextSettings,
    texts_kind: type[TextsSettings] = TextsSettings,
    **texts_own: object,
) -> list[ServedModel]:
    """The chain's models placed by `profile`, then what follows from their placement: the length buckets for the
    entry's bucket count, the batch cap and window of chunks in flight from the graph's placement, and the golden set
    the door's canary runs. The entry's `settings` are entry_settings'; the texts model's (`texts_kind`, with
    `texts_own`) are the entry's derived ones."""
    files = chain_files(spec, chain)
    given = {"parameters": {"bucket_count": spec.bucket_count}} if "bucket_count" in spec.given else {}
    entry = profile.place("text-entry", ServedModel(chain.entry, configs[chain.entry], settings, None, files[chain.entry]), given)
    derived = derive(entry.settings, files[chain.entry])
    own = {key: getattr(spec, key) for key in CLASSIFIER_KEYS if key in spec.given}
    if "preferred_batch_size" in own:
        own["preferred_batch_size"] = list(spec.preferred_batch_size)
    graph_model = ServedModel(chain.graph, configs[chain.graph], None, None, files[chain.graph])
    graph = profile.place("text-graph", graph_model, own, derived.buckets)
    derived = replace(derived, max_batch=graph.config.max_batch_size)
    own = texts_kind(**vars(derived), parameters_from=chain.entry, batches_in_flight=BATCHES_IN_FLIGHT, **texts_own)
    texts = ServedModel(chain.texts, configs[chain.texts], own, chain.adapter, files[chain.texts])
    texts = profile.place("text-texts", texts)
    window = texts.settings.batches_in_flight * instance_count(graph.config) * graph.config.max_batch_size
    texts_settings_placed = replace(texts.settings, chunks_in_flight=window)
    return [replace(entry, settings=derived), replace(texts, settings=texts_settings_placed, calls=(graph.name,)), graph]


def derive(settings: TextSettings, files: dict[str, Path]) -> TextSettings:
    """The entry's settings with its length buckets, chosen for its bucket count from the token lengths the export
    measured at its max_chars, and the golden set of the door's canary, each of whose texts must be one chunk."""
    if TOKEN_LENGTHS not in files or not files[TOKEN_LENGTHS].is_file():
        where = files.get(TOKEN_LENGTHS, TOKEN_LENGTHS)
        raise RepositoryError(f"{settings.classifier}: the text model needs the export's {where} (run `make export`)")
    sample = json.loads(files[TOKEN_LENGTHS].read_text())
    if settings.max_chars != sample["max_chars"]:
        raise RepositoryError(
            f"{settings.classifier}: max_chars {settings.max_chars} differs from the {sample['max_chars']} the export "
            f"measured token lengths at; re-export with --max-chars {settings.max_chars}"
        )
    buckets = tuple(length_buckets(sample["lengths"], settings.bucket_count, sample["max_tokens"]))
    if not settings.canary_from:
        return replace(settings, buckets=buckets)
    section = json.loads(files[settings.canary_from].read_text()).get("canary")
    if section is None:
        return replace(settings, buckets=buckets)
    try:
        golden = golden_set(section)
    except CanaryError as exc:
        raise RepositoryError(f"{settings.classifier}: {settings.canary_from}: {exc}") from None
    longest = max(len(text) for text in golden.texts)
    if settings.max_chars and longest > settings.max_chars:
        raise RepositoryError(
            f"{settings.classifier}: a canary text of {settings.canary_from} has {longest} characters, over max_chars "
            f"{settings.max_chars}, so it would be served as several chunks; re-export with --max-chars {settings.max_chars}"
        )
    return replace(settings, buckets=buckets, canary=json.dumps(section, separators=(",", ":")))


def chain_files(spec: ModelSpec, chain: TextChain) -> dict[str, dict[str, Path]]:
    """Each model's files from the export: the graphs and checkpoint (the chain's `graph_files`) its profile may serve,
    the tokenizer and measured lengths the texts model loads, and what the entry's settings are derived from."""
    folder = export_dir(spec)
    graph = {file: folder / file for file in chain.graph_files if (folder / file).exists()}  # the runner's, the build checks
    required = {chain.entry: ENTRY_FILES, chain.texts: TEXT_FILES}
    return {name: {file: folder / file for file in files} for name, files in required.items()} | {chain.graph: graph}


def check_text(spec: ModelSpec) -> str:
    """`kit add`'s check: the export, validated against PyTorch (export.text_model), and its labels against the spec."""
    check_label_count(spec)
    meta = exports.export(spec, EXPORTERS[spec.task])
    label_names = labels(spec, meta)
    if label_names:
        answer = f"logits differ by at most {meta['max_abs_diff']:.3g} (atol {meta['atol']:g}); labels {', '.join(label_names)}"
        answer += f", answering the probability of {spec.score_label}" if spec.score_label else ""
    else:
        normalized = "L2-normalised" if meta["normalize"] else "not normalised"
        answer = (
            f"embeddings differ by at most {meta['max_abs_diff']:.3g} (atol {meta['atol']:g}); {meta['dimensions']} "
            f"dimensions, {meta['pooling']} pooling, {normalized}"
        )
    return f"exported {spec.name}: ONNX Runtime and PyTorch {answer}; texts chunked " + (
        f"by {spec.max_chars} characters" if spec.max_chars else f"by the model's {meta['max_tokens']}-token limit"
    )
