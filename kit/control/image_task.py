"""The `image-classification` task: any Hugging Face image classifier (ViT, ConvNeXt, ... as a checkpoint folder or a
hub id), served from one encoded image per request, whatever its size, with its processor's preprocessing on the
server and the images of concurrent requests batched in the classifier.

A spec `NAME` becomes three models: the entry ensemble `NAME` (IMAGE, one PNG / JPEG / BMP / WebP file, in; SCORES,
each label's probability, out: what the door and clients call), `NAME_pixels` (kit/adapters/image_pixels_model.py:
decodes and preprocesses each image as the checkpoint's processor does, kit.pipelines.image_processing, so every
image leaves it at the graph's one size) and `NAME_classifier` (the exported graph, softmax included, placed in each
profile as ResNet-50's backbone is). A bad image fails alone in `NAME_pixels`; the good ones of its batch go on.

The export (export.image_classifier, run by kit.control.exports at `kit add` and again whenever the checkpoint
changed) checks its preprocessing against the processor and the graph against PyTorch.
"""

from __future__ import annotations

import json
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control import exports
from kit.control.configs import set_parameter
from kit.control.exports import Exporter, export_dir
from kit.control.onnx_task import bounded_batching
from kit.control.specs import DOOR_ANSWER, DOOR_ROUTE, ModelSpec
from kit.control.text_task import checkpoint_labels

EXPORTER = Exporter("export.image_classifier", lambda spec: [], lambda spec: {}, "an image classifier")
LIKE = "resnet50_backbone"  # the shipped graph whose placement in each profile the classifier takes
MAX_IMAGE_BYTES = 16 << 20
MAX_PIXELS = 40_000_000  # what an image may decode to, checked before it is decoded
PREPROCESSING = "preprocessing.json"
CLASSIFIER_FILES = ("model.onnx", "checkpoint")  # the graph, and the checkpoint the PyTorch runner serves


def names(spec: ModelSpec) -> dict[str, str]:
    return {"entry": spec.name, "pixels": f"{spec.name}_pixels", "classifier": f"{spec.name}_classifier"}


def export(spec: ModelSpec) -> dict:
    return exports.export(spec, EXPORTER)


def image_configs(spec: ModelSpec) -> dict[str, tuple[mc.ModelConfig, str, dict]]:
    """Each model's canonical config, the shipped model whose profile placement it takes, and the profile settings
    the spec itself gives it."""
    meta = export(spec)
    label_names = checkpoint_labels(spec, meta)
    model = names(spec)
    pixels_dims = [3, int(meta["height"]), int(meta["width"])]
    (graph_input,), (graph_output,) = meta["inputs"], meta["outputs"]
    limits = {"max_image_bytes": MAX_IMAGE_BYTES, "max_pixels": MAX_PIXELS}

    entry = mc.ModelConfig(name=model["entry"], platform="ensemble", max_batch_size=spec.max_batch_size)
    entry.input.add(name="IMAGE", data_type=mc.TYPE_STRING, dims=[1])
    entry.output.add(name="SCORES", data_type=mc.TYPE_FP32, dims=[len(label_names)])
    door = {DOOR_ROUTE: spec.door_route, DOOR_ANSWER: "image-labels"}
    for key, value in {"pixels_model": model["pixels"], **door, **limits}.items():
        set_parameter(entry, key, value)
    set_parameter(entry, "labels", json.dumps(label_names, ensure_ascii=False))
    first = entry.ensemble_scheduling.step.add(model_name=model["pixels"], model_version=-1)
    first.input_map["IMAGE"] = "IMAGE"
    first.output_map["PIXELS"] = "pixels"
    second = entry.ensemble_scheduling.step.add(model_name=model["classifier"], model_version=-1)
    second.input_map[graph_input] = "pixels"
    second.output_map[graph_output] = "SCORES"

    pixels = mc.ModelConfig(name=model["pixels"], backend="python")
    pixels.input.add(name="IMAGE", data_type=mc.TYPE_STRING, dims=[1])
    pixels.output.add(name="PIXELS", data_type=mc.TYPE_FP32, dims=pixels_dims)
    set_parameter(pixels, "preprocessing", PREPROCESSING)
    set_parameter(pixels, "parameters_from", model["entry"])  # its limits, read from the entry (kit.control.derived)
    pixels.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
    bounded_batching(pixels, spec)

    classifier = mc.ModelConfig(name=model["classifier"], backend="onnxruntime")
    classifier.input.add(name=graph_input, data_type=mc.TYPE_FP32, dims=pixels_dims)
    classifier.output.add(name=graph_output, data_type=mc.TYPE_FP32, dims=[len(label_names)])
    classifier.instance_group.add(kind=mc.ModelInstanceGroup.KIND_GPU, count=spec.instances)
    bounded_batching(classifier, spec)
    own = {"instances": spec.instances} if "instances" in spec.given else {}
    return {model["entry"]: (entry, "", {}), model["pixels"]: (pixels, "", {}), model["classifier"]: (classifier, LIKE, own)}


def image_files(spec: ModelSpec) -> dict[str, dict[str, Path]]:
    """The preprocessing the pixels model loads, and the graph and checkpoint the classifier's profile may serve."""
    folder = export_dir(spec)
    model = names(spec)
    graph = {file: folder / file for file in CLASSIFIER_FILES if (folder / file).exists()}
    return {model["pixels"]: {PREPROCESSING: folder / PREPROCESSING}, model["classifier"]: graph}


def check_image(spec: ModelSpec) -> str:
    """`kit add`'s check: the export, its preprocessing against the processor and its graph against PyTorch."""
    meta = export(spec)
    label_names = checkpoint_labels(spec, meta)
    return (
        f"exported {spec.name}: preprocessing differs from the checkpoint's processor by at most "
        f"{meta['preprocessing_max_abs_diff']:.3g}, ONNX Runtime from PyTorch by at most {meta['max_abs_diff']:.3g} "
        f"(atol {meta['atol']:g}); {meta['height']}x{meta['width']} pixels; labels {', '.join(label_names)}"
    )
