"""The text tasks: `text-classification`, any Hugging Face sequence classifier (a checkpoint folder or a hub id), and
`feature-extraction`, any encoder as a sentence embedder, both served as RADAR is (a spec too), from the templates in
templates/text.

A spec `NAME` becomes three models: the entry ensemble `NAME` (one text in, what the door and clients call),
`NAME_texts` (the text classifier adapter, kit/adapters/text_classifier_model.py: chunks, length buckets, chunks of
many texts merged into classifier requests, per-label aggregation) and `NAME_classifier` (the exported graph,
placed in each profile as RADAR's classifier is, less what is RADAR's own: its device curves and TensorRT shapes).
The entry answers every label: SCORES [labels] (each label's probability, weighted by chunk length), CHUNK_SCORES
[chunks, labels] and CHUNK_SPANS [chunks, 2]; the labels' names come from the checkpoint's id2label, or the spec's
`labels`, and reach the door through the entry's parameters. An embedder's graph is `NAME_encoder`, and its entry
answers EMBEDDING [dimensions] (the chunks' embeddings, weighted by length, L2-normalised again where the export
normalises), CHUNK_EMBEDDINGS [chunks, dimensions] and CHUNK_SPANS: a text within the token limit is one chunk,
whose embedding is the encoder's on the whole text, as sentence-transformers computes it.

The export (export.text_model, run by kit.control.exports at `kit add` and again whenever the checkpoint or the spec's
chunking changed since) checks the graph against PyTorch and measures the chunk lengths the buckets are chosen from.
"""

from __future__ import annotations

import json
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control import exports
from kit.control.configs import set_parameter, template
from kit.control.exports import Exporter, export_dir
from kit.control.specs import DOOR_ANSWER, DOOR_DESCRIPTION, DOOR_ROUTE, ModelSpec, shipped_like

CLASSIFIER_KEYS = ("max_batch_size", "preferred_batch_size", "max_queue_delay_microseconds", "instances")
CLASSIFIER_FILES = ("model.onnx", "model.onnx.data", "model.cpu.onnx", "model.fused.onnx", "model.fused.onnx.data", "checkpoint")
TEXT_FILES = ("tokenizer.json", "export.json", "token_lengths.json")
ENTRY_FILES = ("export.json", "token_lengths.json")


CLASSIFICATION, FEATURE_EXTRACTION = "text-classification", "feature-extraction"
# The entry's outputs by task: the text's value, each chunk's (and CHUNK_SPANS); the adapter answers what they name.
ANSWERS = {CLASSIFICATION: ("SCORES", "CHUNK_SCORES"), FEATURE_EXTRACTION: ("EMBEDDING", "CHUNK_EMBEDDINGS")}
GRAPH_SUFFIX = {CLASSIFICATION: "_classifier", FEATURE_EXTRACTION: "_encoder"}
WHAT = {CLASSIFICATION: "a sequence classifier", FEATURE_EXTRACTION: "a text encoder"}


def names(spec: ModelSpec) -> dict[str, str]:
    return {"entry": spec.name, "texts": f"{spec.name}_texts", "classifier": spec.name + GRAPH_SUFFIX[spec.task]}


def placed_like() -> dict[str, str]:
    """The models whose placement in each profile a text spec's models take: the shipped text spec's (RADAR's)."""
    return names(shipped_like(lambda spec: spec.task in EXPORTERS, "a text model"))


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


def export(spec: ModelSpec) -> dict:
    return exports.export(spec, EXPORTERS[spec.task])


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


def answer_names(spec: ModelSpec) -> tuple[str, str]:
    """The entry's outputs of a text and of its chunks: one label's probability (`score_label`), every label's, or
    the embedding."""
    return ("SCORE", "CHUNK_SCORES") if spec.score_label else ANSWERS[spec.task]


def door_answer(spec: ModelSpec) -> str:
    if spec.task == FEATURE_EXTRACTION:
        return "text-embedding"
    return "text-score" if spec.score_label else "text-labels"


def checkpoint_labels(spec: ModelSpec, meta: dict) -> list[str]:
    """A classifier's label names in its columns' order (a text or an image one): the spec's, else the checkpoint's
    id2label, as its export.json `meta` holds them."""
    count = int(meta["num_labels"])
    require_label_count(spec, count)
    return list(spec.labels) or [meta["id2label"][str(index)] for index in range(count)]


def labels(spec: ModelSpec, meta: dict) -> list[str]:
    """The label names in the classifier's column order; none for an encoder."""
    return checkpoint_labels(spec, meta) if spec.task == CLASSIFICATION else []


def width(meta: dict) -> int:
    """The graph's output width: a classifier's label count, an encoder's dimensions."""
    return int(meta["dimensions"] if meta.get("task") == FEATURE_EXTRACTION else meta["num_labels"])


def answer_outputs(config: mc.ModelConfig, task: str, count: int) -> None:
    """The text's value and each chunk's (every label's probability, or the embedding), in place of one label's; the
    spans and the token count as the template's."""
    text, chunks = ANSWERS[task]
    del config.output[:]
    config.output.add(name=text, data_type=mc.TYPE_FP32, dims=[count])
    config.output.add(name=chunks, data_type=mc.TYPE_FP32, dims=[-1, count])
    config.output.add(name="CHUNK_SPANS", data_type=mc.TYPE_INT32, dims=[-1, 2])
    config.output.add(name="TOKENS", data_type=mc.TYPE_INT32, dims=[1])


def shipped_meta(spec: ModelSpec) -> dict:
    """What the configs of a shipped spec take from its export, from the spec itself: a shipped model builds before
    `make export` writes its export (its labels name the classifier's columns; its graph answers logits)."""
    if spec.task != CLASSIFICATION or not spec.labels:
        raise spec.error("labels", "is missing from a shipped spec", "a shipped text classifier names its labels in order")
    return {"num_labels": len(spec.labels), "id2label": dict(enumerate(spec.labels)), "outputs": ["logits"]}


def text_configs(spec: ModelSpec) -> dict[str, tuple[mc.ModelConfig, str, dict]]:
    """Each model's canonical config, the shipped model whose profile placement it takes, and the profile settings
    the spec itself gives it (which the template's placement leaves alone)."""
    check_label_count(spec)
    meta = shipped_meta(spec) if spec.shipped else export(spec)
    label_names = labels(spec, meta)
    model = names(spec)
    count = width(meta)
    entry = template("text/entry", model["entry"])
    for key, value in {
        "classifier": model["classifier"],
        "max_chars": spec.max_chars,
        "bucket_count": spec.bucket_count,
        DOOR_ROUTE: spec.door_route,
        DOOR_ANSWER: door_answer(spec),
    }.items():
        set_parameter(entry, key, value)
    if spec.canary:  # the golden set the export computed for the score label, which the door's canary runs
        set_parameter(entry, "canary_from", "export.json")
    if spec.score_label:  # the template's answer: one label's probability, SCORE [1] and CHUNK_SCORES [-1]
        doc = f"{spec.name}: the probability of {spec.score_label} for a text, and for each chunk it was split into"
        set_parameter(entry, DOOR_DESCRIPTION, doc + " (a list for `texts`).")
    else:
        if label_names:
            set_parameter(entry, "labels", json.dumps(label_names, ensure_ascii=False))
        if spec.task == FEATURE_EXTRACTION:  # what the door tells a TEI client (door.tei_api)
            set_parameter(entry, "pooling", meta["pooling"])
        answer_outputs(entry, spec.task, count)
    step = entry.ensemble_scheduling.step[0]
    step.model_name = model["texts"]
    step.output_map.clear()
    for tensor in entry.output:
        step.output_map[tensor.name] = tensor.name
    texts = template("text/texts", model["texts"])
    set_parameter(texts, "parameters_from", model["entry"])
    if not spec.score_label:
        answer_outputs(texts, spec.task, count)
    classifier = template("text/classifier", model["classifier"])
    classifier.output[0].name = meta["outputs"][0]
    classifier.output[0].dims[:] = [count]
    own = spec_batching(spec, classifier, texts)
    entry_own = {"parameters": {"bucket_count": str(spec.bucket_count)}} if "bucket_count" in spec.given else {}
    like = dict.fromkeys(model, "") if spec.shipped else placed_like()  # a shipped model has its own placements
    return {
        model["entry"]: (entry, like["entry"], entry_own),
        model["texts"]: (texts, like["texts"], {}),
        model["classifier"]: (classifier, like["classifier"], own),
    }


def spec_batching(spec: ModelSpec, classifier: mc.ModelConfig, texts: mc.ModelConfig) -> dict:
    """The batching the spec sets itself, on the configs of its graph and of the model that feeds it (its batch cap,
    queue delay and preferred sizes; both queues' timeout): the graph's profile settings, which the template's
    placement then leaves alone."""
    own = {key: getattr(spec, key) for key in CLASSIFIER_KEYS if key in spec.given}
    if "max_batch_size" in own:
        classifier.max_batch_size = spec.max_batch_size
        classifier.dynamic_batching.preferred_batch_size[:] = [b for b in spec.preferred_batch_size if b <= spec.max_batch_size]
    if "max_queue_delay_microseconds" in own:
        classifier.dynamic_batching.max_queue_delay_microseconds = spec.max_queue_delay_microseconds
    if "preferred_batch_size" in own:
        own["preferred_batch_size"] = list(spec.preferred_batch_size)
    if "queue_timeout_seconds" in spec.given:
        timeout = int(spec.queue_timeout_seconds * 1e6)
        texts.dynamic_batching.default_queue_policy.default_timeout_microseconds = timeout
        classifier.dynamic_batching.default_queue_policy.default_timeout_microseconds = timeout
    return own


def text_files(spec: ModelSpec) -> dict[str, dict[str, Path]]:
    """Each model's files from the export: the graphs and checkpoint the classifier's profile may serve, the tokenizer
    and measured chunk lengths the texts model loads, and what the entry's derived parameters come from."""
    folder = export_dir(spec)
    model = names(spec)
    wanted = {model["entry"]: ENTRY_FILES, model["texts"]: TEXT_FILES, model["classifier"]: CLASSIFIER_FILES}
    return {name: {file: folder / file for file in files if (folder / file).exists()} for name, files in wanted.items()}


def check_text(spec: ModelSpec) -> str:
    """`kit add`'s check: the export, validated against PyTorch (export.text_model), and its labels against the spec."""
    check_label_count(spec)
    meta = export(spec)
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
