"""The image-classification export (export.image_classifier) on generated classifiers (tests.checkpoints): its
preprocessing.json, as the server applies it, gives the checkpoint's own processor's pixel values, and its graph
PyTorch's probabilities (and so does the PyTorch runner on the saved checkpoint), on images the export never saw;
processors it cannot reproduce and checkpoints that are not image classifiers are refused with the reason."""

from __future__ import annotations

import base64
import dataclasses
import io
import json

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image
from transformers import AutoImageProcessor, ConvNextImageProcessorPil, ViTImageProcessorPil

from export import image_classifier
from export.onnx_validate import ValidationError, graph_signature
from kit.pipelines.image_processing import Preprocessing, decode_image
from kit.runners.torch import TorchModel, TorchOptions
from tests import checkpoints

KINDS = tuple(checkpoints.IMAGE_LABELS)
KEYS = {
    "task",
    "source",
    "num_labels",
    "id2label",
    "height",
    "width",
    "inputs",
    "outputs",
    "max_abs_diff",
    "atol",
    "preprocessing_max_abs_diff",
    "opset",
}
# (height, width) none of export.image_classifier.SAMPLE_SIZES has: tiny, wide, tall, square, odd
NEW_SIZES = ((5, 9), (23, 50), (128, 96), (31, 31), (200, 45), (61, 260))
LIMIT = 1 << 24


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("image_classifiers")
    done = {}
    for kind in KINDS:
        folder = checkpoints.make(kind, root / "checkpoints")
        out = root / "exports" / kind
        done[kind] = (folder, out, image_classifier.export(str(folder), out))
    return done


def encoded(images: list[Image.Image]) -> list[bytes]:
    """The images as a client sends them: PNG and JPEG in turn (JPEG changes the pixels, which both sides decode)."""
    files = []
    for index, image in enumerate(images):
        buffer = io.BytesIO()
        image.save(buffer, "PNG" if index % 2 == 0 else "JPEG")
        files.append(buffer.getvalue())
    return files


@pytest.mark.parametrize("kind", KINDS)
def test_the_export_writes_the_graph_its_preprocessing_and_what_serving_needs(exports, kind):
    folder, out, meta = exports[kind]
    assert sorted(path.name for path in out.iterdir()) == ["checkpoint", "export.json", "model.onnx", "preprocessing.json"]
    written = json.loads((out / "export.json").read_text())
    assert written == meta and KEYS <= written.keys()
    labels = checkpoints.IMAGE_LABELS[kind]
    assert (written["task"], written["source"], written["num_labels"]) == ("image-classification", str(folder), len(labels))
    assert written["id2label"] == {str(index): label for index, label in enumerate(labels)}
    assert (written["height"], written["width"], written["inputs"], written["outputs"]) == (32, 32, ["pixel_values"], ["scores"])
    assert written["opset"] == image_classifier.DEFAULT_OPSET and written["atol"] == image_classifier.DEFAULT_ATOL
    assert 0 <= written["max_abs_diff"] <= written["atol"]
    assert 0 <= written["preprocessing_max_abs_diff"] <= image_classifier.PREPROCESSING_ATOL
    inputs, outputs = graph_signature(out / "model.onnx")
    assert [(spec.name, spec.dtype, spec.dims) for spec in inputs] == [("pixel_values", np.float32, ("batch_size", 3, 32, 32))]
    assert [(spec.name, spec.dtype, spec.dims) for spec in outputs] == [("scores", np.float32, ("batch_size", len(labels)))]
    preprocessing = Preprocessing.load(out / "preprocessing.json")
    assert (preprocessing.height, preprocessing.width) == (32, 32)


@pytest.mark.parametrize("kind", KINDS)
def test_served_preprocessing_and_graph_give_the_processor_and_pytorch_answers_on_new_images(exports, kind):
    folder, out, _ = exports[kind]
    files = encoded(image_classifier.sample_images(NEW_SIZES, seed=7))
    images = [decode_image(raw, LIMIT, LIMIT) for raw in files]
    preprocessing = Preprocessing.load(out / "preprocessing.json")
    pixels = np.stack([preprocessing(image) for image in images])
    processor = AutoImageProcessor.from_pretrained(folder, backend="pil")
    np.testing.assert_allclose(pixels, processor(images=images, return_tensors="np")["pixel_values"], rtol=0, atol=1e-4)
    graph = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    scores = graph.run(["scores"], {"pixel_values": pixels})[0]
    want = np.array(checkpoints.classify_images(folder, files))
    np.testing.assert_allclose(scores, want, rtol=0, atol=1e-4)
    assert np.ptp(want, axis=0).max() > 1e-2, "the images should get visibly different scores"
    runner = TorchModel.from_checkpoint(out / "checkpoint", ["scores"], TorchOptions(dtype="fp32", device="cpu"))
    np.testing.assert_allclose(runner({"pixel_values": pixels})["scores"], want, rtol=0, atol=1e-4)


@pytest.mark.parametrize(
    "change", [{"resample": int(Image.Resampling.NEAREST)}, {"crop_pct": 0.95}, {"mean": (0.5, 0.456, 0.406)}]
)
def test_the_preprocessing_check_fails_on_a_preprocessing_that_differs(exports, change):
    folder, out, _ = exports["convnext"]
    processor = AutoImageProcessor.from_pretrained(folder, backend="pil")
    wrong = dataclasses.replace(Preprocessing.load(out / "preprocessing.json"), **change)
    with pytest.raises(ValidationError, match="differs from ConvNextImageProcessorPil"):
        image_classifier.check_preprocessing(processor, wrong, image_classifier.sample_images())


@pytest.mark.parametrize(
    "processor, size",
    [
        (ConvNextImageProcessorPil(size={"shortest_edge": 224}), 224),  # resized by crop_pct, then cropped
        (ConvNextImageProcessorPil(size={"shortest_edge": 384}), 384),  # warped to a square, no crop
        (ConvNextImageProcessorPil(size={"shortest_edge": 400}, crop_pct=0.5), 400),
        (ViTImageProcessorPil(size={"shortest_edge": 40}, do_center_crop=True, crop_size={"height": 32, "width": 36}), 32),
        (ViTImageProcessorPil(size={"height": 64, "width": 48}, do_rescale=False, resample=Image.Resampling.LANCZOS), 64),
        (
            ViTImageProcessorPil(do_resize=False, do_center_crop=True, crop_size={"height": 50, "width": 50}, do_normalize=False),
            50,
        ),
    ],
)
def test_derived_preprocessing_equals_the_processor(processor, size):
    preprocessing = image_classifier.derive_preprocessing(processor)
    assert preprocessing.height == size
    diff = image_classifier.check_preprocessing(processor, preprocessing, image_classifier.sample_images(NEW_SIZES, seed=3))
    assert diff <= image_classifier.PREPROCESSING_ATOL


@pytest.mark.parametrize(
    "processor, reason",
    [
        (ViTImageProcessorPil(size={"shortest_edge": 32, "longest_edge": 64}), "size.longest_edge"),
        (ViTImageProcessorPil(size={"shortest_edge": 32}), "no fixed image size"),
        (ViTImageProcessorPil(do_pad=True, pad_size={"height": 256, "width": 256}), "do_pad"),
        (ViTImageProcessorPil(image_mean=[0.5, 0.5], image_std=[0.5, 0.5]), "image_mean has 2 values"),
    ],
)
def test_processor_settings_the_kit_cannot_reproduce_are_refused_by_name(processor, reason):
    with pytest.raises(image_classifier.ExportError, match=reason):
        image_classifier.derive_preprocessing(processor)


def test_a_processor_with_pixel_code_of_its_own_is_refused():
    class Flipping(ViTImageProcessorPil):
        def rescale(self, image, scale, **kwargs):
            return super().rescale(image[:, ::-1], scale, **kwargs)

    with pytest.raises(image_classifier.ExportError, match=r"code of its own \(rescale\)"):
        image_classifier.derive_preprocessing(Flipping())


def test_a_text_classifier_is_refused_with_a_clear_error(tmp_path, capsys):
    folder = checkpoints.make("bert", tmp_path)
    assert image_classifier.main(["--model", str(folder), "--out", str(tmp_path / "out")]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("error: ") and "bert checkpoint (BertForSequenceClassification), not an image classifier" in last
    assert not (tmp_path / "out").exists()


def test_the_reference_program_answers_base64_images_on_stdin(exports, monkeypatch, capsys):
    folder = exports["vit"][0]
    files = encoded(image_classifier.sample_images(((40, 30), (30, 40)), seed=5))
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps([base64.b64encode(raw).decode() for raw in files])))
    assert checkpoints.main(["classify-images", "--model", str(folder)]) == 0
    answers = json.loads(capsys.readouterr().out)
    assert answers == checkpoints.classify_images(folder, files) and len(answers) == 2 and answers[0] != answers[1]
    np.testing.assert_allclose(np.sum(answers, axis=1), 1, atol=1e-6)
