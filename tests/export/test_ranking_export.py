"""The text-ranking export (export.ranking_model) on generated cross-encoders (tests.checkpoints): the graph takes token
types where the tokenizer makes them (the BERT's, not the DistilBERT's) and gives PyTorch's logits on pairs, the
PyTorch runner (the gpu-embedded profile's) serves the same logits from the saved checkpoint, and a checkpoint of more
than one label is refused."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from transformers import AutoTokenizer

from export import ranking_model
from export.text_checkpoint import ExportError
from export.text_export import torch_logits
from kit.runners.torch import TorchModel, TorchOptions
from tests import checkpoints

QUERIES = ["When does the committee meet?", "bread", "Which detector?"]
DOCUMENTS = ["The committee will meet on Thursday.", "Several words make a longer document, padded beside the others.", "No"]


@pytest.fixture(scope="module")
def rankers(tmp_path_factory):
    root = tmp_path_factory.mktemp("rankers")
    return {kind: checkpoints.make(kind, root) for kind in checkpoints.RANKERS}


@pytest.mark.parametrize("kind, typed", [("bert_ranker", True), ("distilbert_ranker", False)])
def test_the_graph_and_the_runner_give_the_cross_encoders_logits_on_pairs(rankers, tmp_path, kind, typed):
    meta = ranking_model.export(str(rankers[kind]), tmp_path)
    assert meta["inputs"] == ["input_ids", "attention_mask", *(["token_type_ids"] if typed else [])]
    assert meta["max_abs_diff"] <= meta["atol"] and meta["task"] == "text-ranking"
    encoded = AutoTokenizer.from_pretrained(rankers[kind])(QUERIES, DOCUMENTS, padding=True, return_tensors="np")
    batch = {name: encoded[name].astype(np.int64) for name in meta["inputs"]}
    if typed:
        assert batch["token_type_ids"].any(), "the documents' tokens are segment 1"
    want = torch_logits(ranking_model.load_cross_encoder(str(rankers[kind]))[0], batch)
    graph = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"]).run(["logits"], batch)[0]
    runner = TorchModel.from_checkpoint(tmp_path / "checkpoint", ["logits"], TorchOptions(dtype="fp32", device="cpu"))
    assert want.shape == (3, 1)
    assert np.abs(graph - want).max() <= meta["atol"]
    assert np.abs(runner(batch)["logits"] - want).max() <= meta["atol"]


def test_a_classifier_of_several_labels_is_no_cross_encoder(tmp_path):
    folder = checkpoints.make("distilbert", tmp_path)
    with pytest.raises(ExportError, match="2 labels; a cross-encoder scores a pair by one logit"):
        ranking_model.export(str(folder), tmp_path / "out")
