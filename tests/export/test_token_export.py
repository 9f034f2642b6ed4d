"""The token-classification export (export.token_model) on generated token classifiers (tests.checkpoints): a BERT
and a DeBERTa-v2, whose graphs give PyTorch's logits for every token of padded batches, as the PyTorch runner (the
gpu-embedded profile's) does from the saved checkpoint; the windows' stride is recorded, a stride no window could move
on by is refused, and so is a checkpoint that is no token classifier."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from transformers import AutoTokenizer

from export import token_model
from export.text_checkpoint import ExportError
from export.text_samples import torch_logits
from kit.runners.torch import TorchModel, TorchOptions
from tests import checkpoints

TEXTS = ["Ada Lovelace met Charles Babbage in London.", "A longer text, padded beside the others, of several words.", "No"]


@pytest.fixture(scope="module")
def taggers(tmp_path_factory):
    root = tmp_path_factory.mktemp("taggers")
    return {kind: checkpoints.make(kind, root) for kind in checkpoints.TAGGERS}


@pytest.mark.parametrize("kind", checkpoints.TAGGERS)
def test_the_graph_and_the_runner_give_the_token_classifiers_logits_for_every_token(taggers, tmp_path, kind):
    meta = token_model.export(str(taggers[kind]), tmp_path, stride=20)
    assert meta["task"] == "token-classification" and meta["stride"] == 20 and meta["max_abs_diff"] <= meta["atol"]
    assert [meta["id2label"][str(i)] for i in range(meta["num_labels"])] == checkpoints.TAGGER_LABELS
    encoded = AutoTokenizer.from_pretrained(taggers[kind])(TEXTS, padding=True, return_tensors="np")
    batch = {name: encoded[name].astype(np.int64) for name in meta["inputs"]}
    want = torch_logits(token_model.load_token_classifier(str(taggers[kind]))[0], batch)
    graph = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"]).run(["logits"], batch)[0]
    runner = TorchModel.from_checkpoint(tmp_path / "checkpoint", ["logits"], TorchOptions(dtype="fp32", device="cpu"))
    assert want.shape == (*batch["input_ids"].shape, len(checkpoints.TAGGER_LABELS))
    assert np.abs(graph - want).max() <= meta["atol"]
    assert np.abs(runner(batch)["logits"] - want).max() <= meta["atol"]


def test_a_stride_of_the_whole_window_and_a_sequence_classifier_are_refused(taggers, tmp_path):
    with pytest.raises(ExportError, match="--stride 126: windows of 128 tokens"):
        token_model.export(str(taggers["bert_tagger"]), tmp_path / "wide", stride=126)
    folder = checkpoints.make("distilbert", tmp_path)
    with pytest.raises(ExportError, match=r"DistilBertForSequenceClassification\), not a token classifier"):
        token_model.export(str(folder), tmp_path / "out")
