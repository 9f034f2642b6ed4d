"""export.ocr's graph edits on toy graphs, and its refusal of a model that is not the pinned one."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import export.ocr as ocr_export
from tests.conftest import ARTIFACTS


def toy(nodes, inputs, outputs, opset=13):
    graph = helper.make_graph(nodes, "toy", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_rec_ends_in_argmax_and_max_of_its_softmax():
    # x [n,3,48,w] -> [n,w,48,3] -> mean over the last axis -> softmax over 48 "classes" per step
    model = toy(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 2, 1]),
            helper.make_node("ReduceMean", ["t"], ["m"], axes=[3], keepdims=0),
            helper.make_node("Softmax", ["m"], ["softmax_0.tmp_0"], axis=2),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 48, "w"])],
        [helper.make_tensor_value_info("softmax_0.tmp_0", TensorProto.FLOAT, ["n", "w", 48])],
    )
    x = np.random.default_rng(0).standard_normal((2, 3, 48, 16)).astype(np.float32)
    (softmax,) = run(model, {"x": x})
    rewritten = ocr_export.rewrite_rec(model)
    onnx.checker.check_model(rewritten)
    assert [o.name for o in rewritten.graph.output] == ["char_indices", "char_probs"]
    indices, probs = run(rewritten, {"image": x})
    np.testing.assert_array_equal(indices, softmax.argmax(axis=2))
    np.testing.assert_array_equal(probs, softmax.max(axis=2))


def test_det_takes_uint8_pixels_and_normalises_like_paddleocr():
    model = toy(
        [helper.make_node("ReduceMean", ["x"], ["sigmoid_0.tmp_0"], axes=[1], keepdims=1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("sigmoid_0.tmp_0", TensorProto.FLOAT, ["n", 1, "h", "w"])],
    )
    pixels = np.random.default_rng(1).integers(0, 256, (1, 4, 5, 3), dtype=np.uint8)
    (out,) = run(ocr_export.rewrite_det(model), {"image": pixels})
    normalised = (pixels.transpose(0, 3, 1, 2) / 255.0 - 0.5) / 0.5
    np.testing.assert_allclose(out, normalised.mean(axis=1, keepdims=True), atol=1e-6)


def test_a_model_file_with_another_checksum_is_refused(monkeypatch):
    name, _ = ocr_export.SOURCES["cls"]
    monkeypatch.setitem(ocr_export.SOURCES, "cls", (name, "0" * 64))
    with pytest.raises(ocr_export.ExportError, match="not the pinned model"):
        ocr_export.verified_source("cls")


def test_paddle_conversion_refuses_clearly_without_paddle2onnx(monkeypatch, tmp_path):
    monkeypatch.setattr(ocr_export.shutil, "which", lambda name: None)
    with pytest.raises(ocr_export.ExportError, match="paddle2onnx is not on PATH"):
        ocr_export.paddle_to_onnx(tmp_path, tmp_path / "rec.onnx")


def test_exported_recogniser_decodes_exactly_like_the_original():
    if not (ARTIFACTS / "ocr" / "export.json").is_file():
        pytest.fail(f"{ARTIFACTS / 'ocr'} has no exported models: run `make export` (make test does it)")
    report = json.loads((ARTIFACTS / "ocr" / "export.json").read_text())
    assert report["validation"]["rec"]["decoded_texts_identical"] is True
    assert report["characters"] == len((ARTIFACTS / "ocr" / "rec" / "characters.txt").read_text(encoding="utf-8").splitlines())
