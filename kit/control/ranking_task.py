"""The `text-ranking` task: a Hugging Face cross-encoder (one label, read over query-document pairs) served as the
text tasks are (kit.control.text_task), its texts model `NAME_pairs` on kit/adapters/pair_ranker_model.py, from the
templates in templates/ranking. docs/MODELS.md says what each model answers and what the export
(export.ranking_model) checks.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import RankingSettings
from kit.control import exports
from kit.control.exports import Exporter
from kit.control.profiles import Profile
from kit.control.served import ServedModel, adapter
from kit.control.specs import ModelSpec
from kit.control.text_task import TextChain, chain_configs, entry_settings, place

TASK = "text-ranking"
CLASSIFIER_FILES = ("model.onnx", "model.onnx.data", "model.cpu.onnx", "checkpoint")
PAIRS_ADAPTER = adapter("pair_ranker_model")


def names(spec: ModelSpec) -> dict[str, str]:
    return {"entry": spec.name, "pairs": f"{spec.name}_pairs", "classifier": f"{spec.name}_classifier"}


def ranking_options(spec: ModelSpec) -> list[str]:
    return ["--max-chars", str(spec.max_chars)]


EXPORTER = Exporter("export.ranking_model", ranking_options, lambda spec: {"max_chars": spec.max_chars}, "a cross-encoder")


def plan(spec: ModelSpec, profile: Profile) -> list[ServedModel]:
    """The entry, its pairs model and its graph, placed as a text task's three models are."""
    meta = exports.export(spec, EXPORTER)
    chain = TextChain(*names(spec).values(), PAIRS_ADAPTER, CLASSIFIER_FILES)
    configs = chain_configs(spec, chain, "ranking/pairs", TASK)
    configs[chain.graph].output[0].dims[:] = [1]
    if "token_type_ids" in meta["inputs"]:
        configs[chain.graph].input.add(name="token_type_ids", data_type=mc.TYPE_INT64, dims=[-1])
    return place(spec, profile, chain, configs, entry_settings(spec, chain), RankingSettings, aggregation=spec.aggregation)


def check_ranking(spec: ModelSpec) -> str:
    """`kit add`'s check: the export, validated against PyTorch on pairs (export.ranking_model)."""
    meta = exports.export(spec, EXPORTER)
    chunks = f"by {spec.max_chars} characters" if spec.max_chars else f"to fit the model's {meta['max_tokens']}-token limit"
    return (
        f"exported {spec.name}: ONNX Runtime and PyTorch logits differ by at most {meta['max_abs_diff']:.3g} "
        f"(atol {meta['atol']:g}) on query-document pairs; inputs {', '.join(meta['inputs'])}; documents chunked {chunks} "
        f"beside the query, each scored by its chunks' {spec.aggregation}"
    )
