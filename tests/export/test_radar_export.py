"""RADAR's export on the tiny stand-in: the path the real checkpoint takes, at test speed."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from export import text_checkpoint, text_model, text_samples
from export.accuracy_gate import Thresholds, agreement
from export.onnx_validate import TensorSpec, ValidationError, graph_signature, require_close, sha256
from export.standins import make_standin

MIXED_TEXTS = [
    "A sentence of moderate length that a person might write in an email.",
    "Tiny.",
    "Chunks of up to three hundred characters are classified one by one and then aggregated into a "
    "single score for the whole text, weighted by their lengths; this one is the longest in its batch.",
    "Two words",
    "Numbers 12345 and symbols #$%& tokenize into many byte-level pieces.",
]


@pytest.fixture(scope="session")
def standin(tmp_path_factory):
    path = tmp_path_factory.mktemp("radar-tiny")
    make_standin("tiny", path, seed=0)
    return path


@pytest.fixture(scope="session")
def exported(standin, tmp_path_factory):
    out = tmp_path_factory.mktemp("radar-onnx")
    meta = text_model.export(str(standin), out)
    return out, meta


def encode(tokenizer, texts):
    encoded = tokenizer(texts, padding=True, truncation=True, max_length=512, return_tensors="np")
    return {name: encoded[name].astype(np.int64) for name in text_samples.INPUT_NAMES}


def test_export_names_inputs_outputs_and_dynamic_axes(exported):
    inputs, outputs = graph_signature(exported[0] / "model.onnx")
    axes = ("batch_size", "sequence_length")
    assert inputs == [
        TensorSpec("input_ids", np.dtype(np.int64), axes),
        TensorSpec("attention_mask", np.dtype(np.int64), axes),
    ]
    assert outputs == [TensorSpec("logits", np.dtype(np.float32), ("batch_size", 2))]


@pytest.mark.parametrize("graph", ["model.onnx", "model.fused.onnx"])
def test_onnx_matches_pytorch_on_padded_batches_of_mixed_lengths(standin, exported, graph):
    model = AutoModelForSequenceClassification.from_pretrained(standin).eval()
    tokenizer = AutoTokenizer.from_pretrained(standin)
    session = ort.InferenceSession(str(exported[0] / graph), providers=["CPUExecutionProvider"])
    for texts in (MIXED_TEXTS, MIXED_TEXTS[:2], MIXED_TEXTS[3:4]):
        batch = encode(tokenizer, texts)
        assert len(texts) == 1 or (batch["attention_mask"] == 0).any()
        (got,) = session.run(["logits"], batch)
        with torch.no_grad():
            want = model(**{k: torch.from_numpy(v) for k, v in batch.items()}).logits.numpy()
        assert got.shape == (len(texts), 2)
        assert np.abs(got - want).max() <= 1e-4
    assert exported[1]["max_abs_diff"] <= 1e-4


def test_padding_does_not_change_a_texts_logits(standin, exported):
    tokenizer = AutoTokenizer.from_pretrained(standin)
    session = ort.InferenceSession(str(exported[0] / "model.onnx"), providers=["CPUExecutionProvider"])
    (alone,) = session.run(["logits"], encode(tokenizer, MIXED_TEXTS[1:2]))
    (batched,) = session.run(["logits"], encode(tokenizer, MIXED_TEXTS))
    np.testing.assert_allclose(batched[1], alone[0], atol=1e-5)


def test_export_json_describes_what_serving_needs(standin, exported):
    out, meta = exported
    assert json.loads((out / "export.json").read_text()) == meta
    assert meta["source"] == str(standin)
    assert meta["num_labels"] == 2
    assert meta["id2label"] == {"0": "AI-generated", "1": "human-written"}
    assert meta["ai_label_index"] == 0
    assert meta["max_tokens"] == 512
    assert meta["pad_token_id"] == 1
    assert meta["opset"] == text_model.DEFAULT_OPSET
    assert meta["atol"] == text_model.DEFAULT_ATOL
    assert meta["external_data"] is None and not (out / "model.onnx.data").exists()
    assert meta["onnx_sha256"] == sha256(out / "model.onnx")


def test_tokenizer_json_round_trips_through_tokenizers(standin, exported):
    backend = Tokenizer.from_file(str(exported[0] / "tokenizer.json"))
    tokenizer = AutoTokenizer.from_pretrained(standin)
    for text in MIXED_TEXTS:
        assert backend.encode(text).ids == tokenizer(text)["input_ids"]
    assert backend.padding is None and backend.truncation is None


def test_export_fails_with_clear_message_when_onnx_differs_above_atol(standin, tmp_path, monkeypatch, capsys):
    torch_logits = text_samples.torch_logits
    monkeypatch.setattr(text_model, "torch_logits", lambda model, batch: torch_logits(model, batch) + 1e-3)
    code = text_model.main(["--model", str(standin), "--out", str(tmp_path), "--atol", "1e-4"])
    assert code != 0
    assert "above atol 0.0001" in capsys.readouterr().err
    assert not (tmp_path / "export.json").exists()


def test_weights_over_the_threshold_go_to_an_external_data_file(standin, tmp_path, monkeypatch):
    monkeypatch.setattr(text_model, "EXTERNAL_DATA_THRESHOLD", 0)
    meta = text_model.export(str(standin), tmp_path)
    assert meta["external_data"] == "model.onnx.data"
    assert (tmp_path / "model.onnx.data").stat().st_size > (tmp_path / "model.onnx").stat().st_size
    assert meta["max_abs_diff"] <= text_model.DEFAULT_ATOL
    # The served CPU graph is a link whose weights file keeps the fused graph's name.
    assert (tmp_path / "model.fused.onnx.data").is_file()
    session = ort.InferenceSession(str(tmp_path / text_model.CPU_GRAPH), providers=["CPUExecutionProvider"])
    assert session.run(["logits"], {"input_ids": np.array([[0, 100, 2]]), "attention_mask": np.ones((1, 3), np.int64)})[
        0
    ].shape == (1, 2)


def test_ai_label_index_must_name_a_label(standin, tmp_path):
    with pytest.raises(text_checkpoint.ExportError, match="not a label"):
        text_model.export(str(standin), tmp_path, ai_label_index=2)


def test_slow_tokenizer_is_rejected_with_a_reason(monkeypatch):
    monkeypatch.setattr(text_checkpoint.AutoTokenizer, "from_pretrained", lambda source: SimpleNamespace(is_fast=False))
    with pytest.raises(text_checkpoint.ExportError, match="fast"):
        text_checkpoint.load_tokenizer("some/slow-model")


@pytest.mark.parametrize(
    ("model_type", "positions", "tokenizer_limit", "expected"),
    [
        ("roberta", 514, 512, 512),
        ("roberta", 514, int(1e30), 512),
        ("bert", 512, int(1e30), 512),
        ("bert", 512, 128, 128),
    ],
)
def test_max_tokens_counts_only_usable_positions(model_type, positions, tokenizer_limit, expected):
    config = SimpleNamespace(model_type=model_type, max_position_embeddings=positions, pad_token_id=1)
    assert text_checkpoint.max_tokens(config, SimpleNamespace(model_max_length=tokenizer_limit)) == expected


def test_nan_difference_fails_validation():
    with pytest.raises(ValidationError):
        require_close([0.0, float("nan")], 1e-4)


def op_counts(path):
    model = onnx.load(str(path), load_external_data=False)
    return {op: sum(node.op_type == op for node in model.graph.node) for op in {node.op_type for node in model.graph.node}}


def ai_probabilities(logits: np.ndarray) -> np.ndarray:
    """Softmax's column 0 (the stand-ins' AI label), written out here rather than taken from the kit."""
    return np.exp(logits[:, 0]) / np.exp(logits).sum(axis=1)


def source_probabilities(standin, texts):
    model = AutoModelForSequenceClassification.from_pretrained(standin).eval()
    tokenizer = AutoTokenizer.from_pretrained(standin)
    with torch.no_grad():
        logits = [
            model(**tokenizer(text, truncation=True, max_length=512, return_tensors="pt")).logits[0].numpy() for text in texts
        ]
    return ai_probabilities(np.array(logits))


@pytest.fixture(scope="session")
def exported_int8(standin, tmp_path_factory):
    out = tmp_path_factory.mktemp("radar-int8")
    return out, text_model.export(str(standin), out, precision="int8")


def test_the_cpu_serves_the_fused_graph_by_default_within_atol_of_pytorch(standin, exported):
    out, meta = exported
    assert (meta["precision"], meta["cpu_graph"]) == ("fused", "model.fused.onnx")
    assert (out / text_model.CPU_GRAPH).samefile(out / "model.fused.onnx")
    layers = AutoModelForSequenceClassification.from_pretrained(standin).config.num_hidden_layers
    assert op_counts(out / "model.fused.onnx").get("Attention") == layers
    assert "Attention" not in op_counts(out / "model.onnx")  # the portable graph stays unfused
    # Its numbers against PyTorch: test_onnx_matches_pytorch_on_padded_batches_of_mixed_lengths.
    assert meta["graphs"]["fused"]["max_abs_diff"] <= text_model.DEFAULT_ATOL


def test_int8_export_serves_a_quantized_graph_and_records_true_gate_figures(standin, exported_int8):
    out, meta = exported_int8
    assert (meta["precision"], meta["cpu_graph"]) == ("int8", "model.int8.onnx")
    assert (out / text_model.CPU_GRAPH).samefile(out / "model.int8.onnx")
    assert op_counts(out / "model.int8.onnx").get("MatMulInteger", 0) > 0
    recorded = meta["graphs"]["int8"]["accuracy"]
    texts = text_samples.gate_texts(300)
    assert recorded["texts"] == len(texts) and any(not text.isascii() for text in texts)
    tokenizer = AutoTokenizer.from_pretrained(standin)
    session = ort.InferenceSession(str(out / "model.int8.onnx"), providers=["CPUExecutionProvider"])
    got = []
    for start in range(0, len(texts), text_samples.GATE_BATCH):
        (logits,) = session.run(["logits"], encode(tokenizer, texts[start : start + text_samples.GATE_BATCH]))
        got += list(ai_probabilities(logits))
    measured = agreement(source_probabilities(standin, texts), np.array(got))
    assert measured.max_abs_diff == pytest.approx(recorded["max_abs_diff"], abs=1e-5)
    assert measured.mean_abs_diff == pytest.approx(recorded["mean_abs_diff"], abs=1e-5)
    assert (measured.agreement, measured.reference_positive_share) == (
        recorded["agreement"],
        recorded["reference_positive_share"],
    )
    assert recorded["thresholds"] == {"max_abs_diff": 0.05, "mean_abs_diff": 0.01, "min_agreement": 0.98}
    graph = meta["graphs"]["int8"]
    assert graph["weights"] in ("s8", "u8") and [r["weights"] for r in graph["rejected"]] == (
        ["s8"] if graph["weights"] == "u8" else []
    )


def test_int8_export_fails_above_the_users_thresholds_and_writes_no_export_json(standin, tmp_path, capsys):
    code = text_model.main(["--model", str(standin), "--out", str(tmp_path), "--precision", "int8", "--int8-max-diff", "1e-6"])
    assert code == 1
    error = capsys.readouterr().err
    assert "the INT8 graph fails its accuracy gate on 48 texts in every weight format" in error
    assert "s8 weights: max abs probability difference" in error and "u8 weights: max abs probability difference" in error
    assert not (tmp_path / "export.json").exists() and not (tmp_path / "model.int8.onnx").exists()


def test_fp32_precision_serves_the_graph_as_exported(standin, tmp_path):
    meta = text_model.export(str(standin), tmp_path, precision="fp32")
    assert meta["cpu_graph"] == "model.onnx" and (tmp_path / text_model.CPU_GRAPH).samefile(tmp_path / "model.onnx")
    assert not (tmp_path / "model.fused.onnx").exists()


@pytest.mark.parametrize("which", ["exported", "exported_int8"])
def test_canary_holds_the_source_models_scores_for_one_chunk_texts(standin, which, request):
    out, meta = request.getfixturevalue(which)
    canary = meta["canary"]
    assert all(len(text) <= 300 for text in canary["texts"]) and any(not text.isascii() for text in canary["texts"])
    np.testing.assert_allclose(canary["scores"], source_probabilities(standin, canary["texts"]), atol=1e-6)
    expected_tolerance = Thresholds().max_abs_diff if meta["precision"] == "int8" else text_samples.CANARY_TOLERANCE
    assert canary["tolerance"] == expected_tolerance


def test_accuracy_gate_measures_difference_and_decision_agreement():
    result = agreement(np.array([0.1, 0.6, 0.9, 0.45]), np.array([0.2, 0.4, 0.9, 0.45]))
    assert (result.texts, result.agreement, result.reference_positive_share) == (4, 0.75, 0.5)
    assert result.max_abs_diff == pytest.approx(0.2)
    assert result.mean_abs_diff == pytest.approx(0.075)
    assert result.failures(Thresholds(0.25, 0.2, 0.7)) == []
    assert len(result.failures(Thresholds(0.1, 0.05, 0.8))) == 3
    assert agreement(np.array([0.5]), np.array([np.nan])).failures(Thresholds(1.0, 1.0, 0.0))


def test_also_int8_gates_the_int8_graph_while_the_cpu_serves_the_fused_one(standin, tmp_path):
    meta = text_model.export(str(standin), tmp_path, also_int8=True)
    assert meta["cpu_graph"] == "model.fused.onnx" and (tmp_path / text_model.CPU_GRAPH).samefile(tmp_path / "model.fused.onnx")
    assert meta["graphs"]["int8"]["accuracy"]["texts"] == len(text_samples.gate_texts(300))
    assert op_counts(tmp_path / "model.int8.onnx").get("MatMulInteger", 0) > 0
    assert meta["canary"]["tolerance"] == text_samples.CANARY_TOLERANCE
