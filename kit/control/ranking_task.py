"""The `text-ranking` task: any Hugging Face cross-encoder (a one-label `AutoModelForSequenceClassification` read over
query-document pairs, a checkpoint folder or a hub id), served as the text tasks are, from the templates in
templates/ranking (and the text task's classifier template).

A spec `NAME` becomes three models: the entry ensemble `NAME` (QUERY and DOCUMENT in, what the door and clients call),
`NAME_pairs` (kit/adapters/pair_ranker_model.py: each document chunked to fit beside its query, the chunk pairs of
many requests merged into classifier requests by length bucket, each document's score its chunks' best or mean, the
spec's `aggregation`) and `NAME_classifier` (the exported graph: input_ids, attention_mask and, for a model that reads
segments, token_type_ids; placed in each profile as RADAR's classifier is, the PyTorch runner of the gpu-embedded
profile included, which serves the saved checkpoint through the export's own module). The entry answers SCORE [1],
CHUNK_SCORES [chunks], CHUNK_SPANS [chunks, 2] (offsets into the document) and TOKENS [1].

The export (export.ranking_model, at `kit add` and whenever the checkpoint or the spec's chunking changed) checks the
graph against PyTorch on pairs and measures the chunk pairs' token lengths the buckets are chosen from.
"""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control import exports
from kit.control.configs import set_parameter, template
from kit.control.exports import Exporter, export_dir
from kit.control.specs import DOOR_ANSWER, DOOR_ROUTE, ModelSpec
from kit.control.text_task import ENTRY_FILES, TEXT_FILES, placed_like, spec_batching

TASK = "text-ranking"
CLASSIFIER_FILES = ("model.onnx", "model.onnx.data", "model.cpu.onnx", "checkpoint")


def names(spec: ModelSpec) -> dict[str, str]:
    return {"entry": spec.name, "pairs": f"{spec.name}_pairs", "classifier": f"{spec.name}_classifier"}


def ranking_options(spec: ModelSpec) -> list[str]:
    return ["--max-chars", str(spec.max_chars)]


EXPORTER = Exporter("export.ranking_model", ranking_options, lambda spec: {"max_chars": spec.max_chars}, "a cross-encoder")


def ranking_configs(spec: ModelSpec) -> dict[str, tuple[mc.ModelConfig, str, dict]]:
    """Each model's canonical config, the shipped text model whose placement it takes, and the spec's own settings."""
    meta = exports.export(spec, EXPORTER)
    model = names(spec)
    entry = template("ranking/entry", model["entry"])
    for key, value in {
        "classifier": model["classifier"],
        "max_chars": spec.max_chars,
        "bucket_count": spec.bucket_count,
        DOOR_ROUTE: spec.door_route,
        DOOR_ANSWER: TASK,
    }.items():
        set_parameter(entry, key, value)
    entry.ensemble_scheduling.step[0].model_name = model["pairs"]
    pairs = template("ranking/pairs", model["pairs"])
    set_parameter(pairs, "parameters_from", model["entry"])
    set_parameter(pairs, "aggregation", spec.aggregation)
    classifier = template("text/classifier", model["classifier"])
    classifier.output[0].dims[:] = [1]
    if "token_type_ids" in meta["inputs"]:
        classifier.input.add(name="token_type_ids", data_type=mc.TYPE_INT64, dims=[-1])
    own = spec_batching(spec, classifier, pairs)
    entry_own = {"parameters": {"bucket_count": str(spec.bucket_count)}} if "bucket_count" in spec.given else {}
    like = placed_like()
    return {
        model["entry"]: (entry, like["entry"], entry_own),
        model["pairs"]: (pairs, like["texts"], {}),
        model["classifier"]: (classifier, like["classifier"], own),
    }


def ranking_files(spec: ModelSpec) -> dict[str, dict[str, Path]]:
    """The graph and checkpoint for the classifier, the tokenizer and measured lengths for the pairs model, what the
    entry's derived parameters come from."""
    folder = export_dir(spec)
    model = names(spec)
    wanted = {model["entry"]: ENTRY_FILES, model["pairs"]: TEXT_FILES, model["classifier"]: CLASSIFIER_FILES}
    return {name: {file: folder / file for file in files if (folder / file).exists()} for name, files in wanted.items()}


def check_ranking(spec: ModelSpec) -> str:
    """`kit add`'s check: the export, validated against PyTorch on pairs (export.ranking_model)."""
    meta = exports.export(spec, EXPORTER)
    chunks = f"by {spec.max_chars} characters" if spec.max_chars else f"to fit the model's {meta['max_tokens']}-token limit"
    return (
        f"exported {spec.name}: ONNX Runtime and PyTorch logits differ by at most {meta['max_abs_diff']:.3g} "
        f"(atol {meta['atol']:g}) on query-document pairs; inputs {', '.join(meta['inputs'])}; documents chunked {chunks} "
        f"beside the query, each scored by its chunks' {spec.aggregation}"
    )
