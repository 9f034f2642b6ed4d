"""The `token-classification` task: a Hugging Face token classifier (named entities, PII) served as the text tasks
are (kit.control.text_task), its texts model `NAME_tokens` on kit/adapters/token_classifier_model.py, from the
templates in templates/tokens. docs/MODELS.md says what each model answers and what the export (export.token_model)
checks.
"""

from __future__ import annotations

import json

from kit.adapters.artifacts import export_labels
from kit.control import exports
from kit.control.exports import Exporter
from kit.control.profiles import Profile
from kit.control.ranking_task import CLASSIFIER_FILES
from kit.control.served import ServedModel, adapter
from kit.control.specs import ModelSpec
from kit.control.text_task import TextChain, chain_configs, entry_settings, place
from kit.pipelines.text.entities import entity_types

TASK = "token-classification"
TOKENS_ADAPTER = adapter("token_classifier_model")


def names(spec: ModelSpec) -> dict[str, str]:
    return {"entry": spec.name, "tokens": f"{spec.name}_tokens", "classifier": f"{spec.name}_classifier"}


EXPORTER = Exporter(
    "export.token_model", lambda spec: ["--stride", str(spec.stride)], lambda spec: {"stride": spec.stride}, "a token classifier"
)


def plan(spec: ModelSpec, profile: Profile) -> list[ServedModel]:
    """The entry, its tokens model and its graph, placed as a text task's three models are."""
    meta = exports.export(spec, EXPORTER)
    chain = TextChain(*names(spec).values(), TOKENS_ADAPTER, CLASSIFIER_FILES)
    configs = chain_configs(spec, chain, "tokens/tokens", "text-entities")
    configs[chain.graph].output[0].dims[:] = [-1, int(meta["num_labels"])]  # a row of label logits per token
    types = json.dumps(entity_types(export_labels(meta)), ensure_ascii=False)  # what the door's schema names an entity's label
    return place(spec, profile, chain, configs, entry_settings(spec, chain, labels=types))


def check_tokens(spec: ModelSpec) -> str:
    """`kit add`'s check: the export, validated against PyTorch on every token (export.token_model)."""
    meta = exports.export(spec, EXPORTER)
    return (
        f"exported {spec.name}: ONNX Runtime and PyTorch logits differ by at most {meta['max_abs_diff']:.3g} "
        f"(atol {meta['atol']:g}) for every token; labels {', '.join(export_labels(meta))}; texts read in windows of "
        f"{meta['max_tokens']} tokens that share {meta['stride']}"
    )
