"""ResNet export on the tiny stand-in, saved and loaded as a checkpoint directory: the path real
weights (microsoft/resnet-50 or a local copy) take, at test speed."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

from export import resnet
from export.onnx_validate import TensorSpec, graph_signature, sha256


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("resnet-tiny")
    resnet.make_standin("tiny", seed=1).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def exported(checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("resnet-onnx")
    return out, resnet.export(out, source=str(checkpoint))


def test_export_names_inputs_outputs_and_dynamic_axes(exported):
    inputs, outputs = graph_signature(exported[0] / "model.onnx")
    assert inputs == [
        TensorSpec("pixel_values", np.dtype(np.float32), ("batch_size", 3, "height", "width")),
        TensorSpec("image_sizes", np.dtype(np.int64), ("batch_size", 2)),
    ]
    assert outputs == [TensorSpec("probs", np.dtype(np.float32), ("batch_size", 1000))]


def test_padded_mixed_batch_equals_the_checkpoint_on_each_image_alone(checkpoint, exported):
    model = resnet.load_model(str(checkpoint))
    rng = np.random.default_rng(7)
    images = [rng.standard_normal((3, h, w), dtype=np.float32) for h, w in [(31, 70), (96, 96), (65, 33), (1, 1)]]
    session = ort.InferenceSession(str(exported[0] / "model.onnx"), providers=["CPUExecutionProvider"])
    (probs,) = session.run(["probs"], resnet.pad_batch(images))
    want = resnet.unpadded_probs(model, images)
    assert np.max(np.abs(probs - want)) <= exported[1]["atol"]
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)


def test_export_json_records_the_measured_effect_of_padding(exported):
    out, meta = exported
    assert json.loads((out / "export.json").read_text()) == meta
    assert meta["stand_in"] is False
    assert meta["onnx_sha256"] == sha256(out / "model.onnx")
    assert meta["max_abs_diff"] <= meta["atol"]
    effect = {row["padding_px"]: row for row in meta["padding_effect"]}
    assert set(effect) == set(resnet.PADDINGS)
    assert all(row["served_graph"]["probs"] <= meta["atol"] for row in effect.values())
    # Masking only the global pool is not enough: the border activations change the result.
    assert effect[32]["pool_mask_only"]["log_probs"] > 100 * max(effect[32]["served_graph"]["log_probs"], 1e-6)


def test_a_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(resnet.ExportError, match="cannot load"):
        resnet.export(tmp_path / "out", source=str(tmp_path / "no-such-checkpoint"))
