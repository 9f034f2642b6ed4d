"""Load what the export wrote into a model's version folder (or an export folder) into pipelines.

OCR's is its pipeline module's (model_repository/ocr_pipeline.py), so that RADAR and ResNet adapters do not load OpenCV."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer

from kit.adapters.settings import TextSettings
from kit.pipelines.batching.merge import CostModel
from kit.pipelines.text.aggregate import Head
from kit.pipelines.text.entities import TokenPipeline
from kit.pipelines.text.pairs import PairPipeline, RankHead
from kit.pipelines.text.pipeline import TextPipeline


def text_pipeline(folder: Path, settings: TextSettings) -> TextPipeline:
    """RADAR, or any text model export.text_model exported, from `tokenizer.json` and `export.json` (token limit, pad id,
    the AI label's index; an encoder's output and normalisation)."""
    meta = json.loads((folder / "export.json").read_text())
    embedder = meta.get("task") == "feature-extraction"
    return TextPipeline(
        **tokens_and_buckets(folder, meta, settings),
        ai_label_index=int(meta.get("ai_label_index", 0)),
        head=Head(softmax=not embedder, normalize=embedder and bool(meta["normalize"])),
        output=graph_output(folder),
    )


def pair_pipeline(folder: Path, settings: TextSettings, aggregation: str) -> tuple[PairPipeline, bool]:
    """A cross-encoder export.ranking_model exported, and whether its graph takes token_type_ids."""
    meta = json.loads((folder / "export.json").read_text())
    pipeline = PairPipeline(**tokens_and_buckets(folder, meta, settings), head=RankHead(aggregation), output=meta["outputs"][0])
    return pipeline, "token_type_ids" in meta["inputs"]


def token_pipeline(folder: Path, settings: TextSettings) -> TokenPipeline:
    """A token classifier export.token_model exported: its labels, the windows' stride and the unknown token's id."""
    meta = json.loads((folder / "export.json").read_text())
    shared = tokens_and_buckets(folder, meta, settings)
    del shared["max_chars"]  # windows of tokens, not chunks of characters
    stride, unknown = int(meta["stride"]), meta["unk_token_id"]
    return TokenPipeline(**shared, labels=export_labels(meta), stride=stride, unk_id=unknown, output=meta["outputs"][0])


def export_labels(meta: dict) -> list[str]:
    """A classifier's label names in its columns' order, as its export.json (`meta`) holds the checkpoint's id2label."""
    return [meta["id2label"][str(index)] for index in range(int(meta["num_labels"]))]


def tokens_and_buckets(folder: Path, meta: dict, settings: TextSettings) -> dict:
    """What every text pipeline takes from its export and its settings: the tokenizer, the token limit and pad id, the
    length buckets, the chunks' characters and the classifier's batch."""
    return {
        "tokenizer": Tokenizer.from_file(str(folder / "tokenizer.json")),
        "max_tokens": int(meta["max_tokens"]),
        "pad_id": int(meta["pad_token_id"]),
        "buckets": list(settings.buckets),
        "max_chars": settings.max_chars,
        "max_batch": settings.max_batch,
    }


def graph_output(folder: Path) -> str:
    """The output of the text graph export.text_model wrote into `folder`: a classifier's logits, an encoder's embeddings."""
    return json.loads((folder / "export.json").read_text()).get("outputs", ["logits"])[0]


def cost_model(path: Path) -> CostModel:
    """The merge policy's cost model as export.resnet_cost measured it."""
    return CostModel.from_json(json.loads(Path(path).read_text())["model"])
