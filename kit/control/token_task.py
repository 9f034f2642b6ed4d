"""The `token-classification` task: any Hugging Face token classifier (`AutoModelForTokenClassification`: named
entities, PII; a checkpoint folder or a hub id), served as the text tasks are (kit.control.text_task's placement), from
the templates in templates/tokens and the text tasks' classifier template.

A spec `NAME` becomes three models: the entry ensemble `NAME` (TEXT in, what the door and clients call), `NAME_tokens`
(kit/adapters/token_classifier_model.py: each text read in windows of the model's token limit that share the export's
stride, the windows of many texts merged into classifier requests by length bucket, each window's tokens grouped into
entities as `transformers`' pipeline groups them, kit.pipelines.text.entities) and `NAME_classifier` (the exported
graph, logits [tokens, labels] per window; placed in each profile as a text task's graph is, the PyTorch runner of the
gpu-embedded profile included). The entry answers ENTITY_LABELS, ENTITY_SCORES, ENTITY_SPANS (character offsets into
the text), ENTITY_WORDS, CHUNK_SPANS (the windows') and TOKENS.

The export (export.token_model, at `kit add` and whenever the checkpoint or the spec's stride changed) checks the graph
against PyTorch on every token and measures the windows' token lengths the buckets are chosen from.
"""

from __future__ import annotations

import json

from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import TextSettings, TextsSettings
from kit.control import exports
from kit.control.configs import set_parameters, template
from kit.control.exports import Exporter
from kit.control.profiles import Profile
from kit.control.ranking_task import CLASSIFIER_FILES
from kit.control.served import ServedModel, adapter
from kit.control.specs import ModelSpec, door_parameters
from kit.control.text_task import BATCHES_IN_FLIGHT, MAX_TEXT_BYTES, TextChain, chain_files, place, spec_batching, tokenizing
from kit.pipelines.text.entities import entity_types

TASK = "token-classification"
TOKENS_ADAPTER = adapter("token_classifier_model")


def names(spec: ModelSpec) -> dict[str, str]:
    return {"entry": spec.name, "tokens": f"{spec.name}_tokens", "classifier": f"{spec.name}_classifier"}


EXPORTER = Exporter(
    "export.token_model", lambda spec: ["--stride", str(spec.stride)], lambda spec: {"stride": spec.stride}, "a token classifier"
)


def labels(meta: dict) -> list[str]:
    """The classifier's label names, in its columns' order."""
    return [meta["id2label"][str(index)] for index in range(int(meta["num_labels"]))]


def canonical(spec: ModelSpec, meta: dict, model: dict[str, str]) -> dict[str, mc.ModelConfig]:
    """Each model's config as the templates and the spec make it, before any profile places it."""
    entry = template("tokens/entry", model["entry"])
    set_parameters(entry, door_parameters(spec, "text-entities"))
    entry.ensemble_scheduling.step[0].model_name = model["tokens"]
    tokens = template("tokens/tokens", model["tokens"])
    tokenizing(entry, tokens)
    classifier = template("text/classifier", model["classifier"])
    classifier.output[0].dims[:] = [-1, int(meta["num_labels"])]  # a row of label logits per token
    spec_batching(spec, classifier, tokens)
    return {model["entry"]: entry, model["tokens"]: tokens, model["classifier"]: classifier}


def plan(spec: ModelSpec, profile: Profile) -> list[ServedModel]:
    """The entry, its tokens model and its graph, placed as a text task's three models are."""
    meta = exports.export(spec, EXPORTER)
    model = names(spec)
    types = json.dumps(entity_types(labels(meta)), ensure_ascii=False)  # what the door's schema names an entity's label
    settings = TextSettings(
        classifier=model["classifier"], max_chars=0, max_text_bytes=MAX_TEXT_BYTES, bucket_count=spec.bucket_count, labels=types
    )

    def tokens(derived: TextSettings) -> TextsSettings:
        return TextsSettings(**vars(derived), parameters_from=model["entry"], batches_in_flight=BATCHES_IN_FLIGHT)

    chain = TextChain(model["entry"], model["tokens"], model["classifier"], TOKENS_ADAPTER)
    return place(spec, profile, chain, canonical(spec, meta, model), chain_files(spec, chain, CLASSIFIER_FILES), settings, tokens)


def check_tokens(spec: ModelSpec) -> str:
    """`kit add`'s check: the export, validated against PyTorch on every token (export.token_model)."""
    meta = exports.export(spec, EXPORTER)
    return (
        f"exported {spec.name}: ONNX Runtime and PyTorch logits differ by at most {meta['max_abs_diff']:.3g} "
        f"(atol {meta['atol']:g}) for every token; labels {', '.join(labels(meta))}; texts read in windows of "
        f"{meta['max_tokens']} tokens that share {meta['stride']}"
    )
