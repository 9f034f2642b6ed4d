"""The feature-extraction export (export.text_model --task feature-extraction) on generated encoders (tests.checkpoints):
it pools and normalises as the checkpoint's sentence-transformers files say, its graph equals the encoder's hidden
states pooled here by hand, the PyTorch runner serves the same embedding from the saved checkpoint, and what the
kit cannot reproduce is refused with the reason."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnxruntime as ort
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from export import text_checkpoint, text_model, text_samples
from kit.runners.torch import TorchModel, TorchOptions
from tests import checkpoints

TEXTS = ["A short one.", "Several words make a sentence of some length, padded beside the short one.", "Yes"]


@pytest.fixture(scope="module")
def encoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoders")
    return {kind: checkpoints.make(kind, root) for kind in checkpoints.ENCODERS}


def by_hand(folder, inputs: dict[str, np.ndarray], pooling: str, normalize: bool) -> np.ndarray:
    """The encoder's last hidden state, pooled over the real tokens (or the first), normalised: sentence-transformers'
    arithmetic, written out."""
    model = AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        hidden = model(**{k: torch.from_numpy(v) for k, v in inputs.items()}).last_hidden_state.numpy()
    mask = inputs["attention_mask"][..., None].astype(np.float32)
    pooled = hidden[:, 0] if pooling == "cls" else (hidden * mask).sum(axis=1) / mask.sum(axis=1)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True) if normalize else pooled


def encode(folder, texts):
    encoded = AutoTokenizer.from_pretrained(folder)(texts, padding=True, return_tensors="np")
    return {name: encoded[name].astype(np.int64) for name in text_samples.INPUT_NAMES}


@pytest.mark.parametrize(
    "kind, options, pooling, normalize", [("bert_encoder", {}, "mean", True), ("mpnet", {"pooling": "cls"}, "cls", False)]
)
def test_the_graph_and_the_runner_give_the_embedding_pooled_as_declared(encoders, tmp_path, kind, options, pooling, normalize):
    meta = text_model.export(str(encoders[kind]), tmp_path, task=text_checkpoint.FEATURE_EXTRACTION, **options)
    assert (meta["task"], meta["pooling"], meta["normalize"], meta["dimensions"]) == (
        "feature-extraction",
        pooling,
        normalize,
        32,
    )
    assert meta["outputs"] == ["embeddings"] and meta["canary"] is None and "num_labels" not in meta
    inputs = encode(encoders[kind], TEXTS)
    want = by_hand(encoders[kind], inputs, pooling, normalize)
    graph = ort.InferenceSession(str(tmp_path / "model.cpu.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(graph.run(["embeddings"], inputs)[0], want, atol=1e-4)
    runner = TorchModel.from_checkpoint(tmp_path / "checkpoint", ["embeddings"], TorchOptions(dtype="fp32", device="cpu"))
    np.testing.assert_allclose(runner(inputs)["embeddings"], want, atol=1e-4)


def test_a_sentence_transformers_module_the_kit_cannot_reproduce_is_refused(encoders, tmp_path):
    folder = tmp_path / "dense"
    shutil.copytree(encoders["bert_encoder"], folder)
    modules = [*checkpoints.ST_MODULES, {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}]
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(text_checkpoint.ExportError, match="sentence_transformers.models.Dense"):
        text_model.export(str(folder), tmp_path / "out", task=text_checkpoint.FEATURE_EXTRACTION)


def test_an_encoder_has_no_int8_graph(encoders, tmp_path):
    with pytest.raises(text_checkpoint.ExportError, match="no INT8 graph"):
        text_model.export(str(encoders["mpnet"]), tmp_path, task=text_checkpoint.FEATURE_EXTRACTION, precision="int8")
