"""The `image-classification` task: any Hugging Face image classifier (ViT, ConvNeXt, ... as a checkpoint folder or a
hub id), served from one encoded image per request, whatever its size, with its processor's preprocessing on the
server and the images of concurrent requests batched in the classifier.

A spec `NAME` becomes the entry ensemble `NAME`, `NAME_pixels` (kit/adapters/image_pixels_model.py: decodes and
preprocesses each image as the checkpoint's processor does, so every image leaves it at the graph's one size, and a
bad image fails alone) and `NAME_classifier` (the exported graph). A spec with `input = "pixels"` takes normalised
pixels of any size instead (ResNet-50's contract) and becomes the entry `NAME` (kit/adapters/
padded_classifier_model.py), which merges the images of concurrent requests across sizes by its `merge_policy` into
padded runs of `NAME_backbone`, a graph that masks the padding. docs/MODELS.md says what each answers and what the
exports (export.image_classifier, export.resnet) check.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from kit.adapters.settings import ImageClassifierSettings, PixelClassifierSettings
from kit.control import exports
from kit.control.configs import set_parameters, template
from kit.control.exports import Exporter, export_dir
from kit.control.onnx_task import bounded_batching
from kit.control.profiles import Profile
from kit.control.served import ServedModel, adapter
from kit.control.specs import ModelSpec, door_parameters
from kit.control.text_task import checkpoint_labels

EXPORTER = Exporter("export.image_classifier", lambda spec: [], lambda spec: {}, "an image classifier")
PIXELS_EXPORTER = Exporter(
    "export.resnet",
    lambda spec: ["--cost"] if spec.merge_policy == "cost" else [],
    lambda spec: {"input": spec.input, "merge_policy": spec.merge_policy},
    "a ResNet image classifier (the padded graph of pixels is a ResNet's)",
)
COST_MODEL = "cost.json"
BACKBONE_FILES = ("model.onnx", "checkpoint")
MAX_IMAGE_BYTES = 16 << 20
MAX_PIXELS = 40_000_000  # what an image may decode to, checked before it is decoded
PREPROCESSING = "preprocessing.json"
CLASSIFIER_FILES = ("model.onnx", "checkpoint")  # the graph, and the checkpoint the PyTorch runner serves
PIXELS_ADAPTER = adapter("padded_classifier_model")
PREPROCESS_ADAPTER = adapter("image_pixels_model")


def names(spec: ModelSpec) -> dict[str, str]:
    if spec.input == "pixels":
        return {"entry": spec.name, "backbone": f"{spec.name}_backbone"}
    return {"entry": spec.name, "pixels": f"{spec.name}_pixels", "classifier": f"{spec.name}_classifier"}


def exporter(spec: ModelSpec) -> Exporter:
    return PIXELS_EXPORTER if spec.input == "pixels" else EXPORTER


def export(spec: ModelSpec) -> dict:
    return exports.export(spec, exporter(spec))


def shipped_meta(spec: ModelSpec) -> dict:
    """What the configs of a shipped spec take from its export, from the spec itself: a shipped model builds before
    `make export` writes its export."""
    count = len(spec.labels) or spec.num_labels
    if not count:
        raise spec.error("num_labels", "is missing from a shipped spec", "a shipped image classifier names its label count")
    return {"num_labels": count, "id2label": {str(i): spec.labels[i] if spec.labels else str(i) for i in range(count)}}


Unplaced = list[tuple[str, ServedModel, dict]]  # each model with its role and the placement its spec gives


def plan(spec: ModelSpec, profile: Profile) -> list[ServedModel]:
    """The spec's models, each placed by its role."""
    unplaced = pixels_models(spec) if spec.input == "pixels" else encoded_models(spec)
    return [profile.place(role, model, given) for role, model, given in unplaced]


def pixels_models(spec: ModelSpec) -> Unplaced:
    """The entry and backbone of a spec of pixels, from their templates: what the spec gives in place of the
    templates' batch cap, queue delay and timeout, its route, policy and label count."""
    meta = shipped_meta(spec) if spec.shipped else export(spec)
    label_names = checkpoint_labels(spec, meta)
    model, files = names(spec), image_files(spec)
    entry, backbone = template("pixels/entry", model["entry"]), template("pixels/backbone", model["backbone"])
    set_parameters(entry, door_parameters(spec, "pixels-classes"))
    for config in (entry, backbone):
        config.output[0].dims[:] = [len(label_names)]
        if "max_batch_size" in spec.given:
            config.max_batch_size = spec.max_batch_size
        if "queue_timeout_seconds" in spec.given:
            config.dynamic_batching.default_queue_policy.default_timeout_microseconds = int(spec.queue_timeout_seconds * 1e6)
    if "max_queue_delay_microseconds" in spec.given:
        entry.dynamic_batching.max_queue_delay_microseconds = spec.max_queue_delay_microseconds
    if "preferred_batch_size" in spec.given:
        entry.dynamic_batching.preferred_batch_size[:] = spec.preferred_batch_size
    settings = PixelClassifierSettings(
        backbone=model["backbone"],
        merge_policy=spec.merge_policy,
        cost_model=COST_MODEL,
        max_image_pixels=spec.max_image_pixels,
        # a shipped spec without labels has none but the class indices
        labels=json.dumps(label_names, ensure_ascii=False) if not spec.shipped or spec.labels else "",
    )
    own = {"instances": spec.instances} if "instances" in spec.given else {}
    return [
        ("pixels-entry", ServedModel(entry.name, entry, settings, PIXELS_ADAPTER, files[entry.name], calls=(backbone.name,)), {}),
        ("pixels-backbone", ServedModel(backbone.name, backbone, files=files[backbone.name]), own),
    ]


def encoded_models(spec: ModelSpec) -> Unplaced:
    """The entry ensemble, the model that decodes and preprocesses, and the classifier's graph, from their templates
    (templates/image) with the export's tensors and the spec's batching."""
    meta = export(spec)
    label_names = checkpoint_labels(spec, meta)
    model, files = names(spec), image_files(spec)
    pixels_dims = [3, int(meta["height"]), int(meta["width"])]
    (graph_input,), (graph_output,) = meta["inputs"], meta["outputs"]

    entry, pixels, classifier = (template(f"image/{part}", model[part]) for part in ("entry", "pixels", "classifier"))
    entry.max_batch_size = spec.max_batch_size
    entry.output[0].dims[:] = classifier.output[0].dims[:] = [len(label_names)]
    set_parameters(entry, door_parameters(spec, "image-labels"))
    first, second = entry.ensemble_scheduling.step
    first.model_name, second.model_name = model["pixels"], model["classifier"]
    second.input_map[graph_input] = "pixels"
    second.output_map[graph_output] = "SCORES"
    pixels.output[0].dims[:] = classifier.input[0].dims[:] = pixels_dims
    classifier.input[0].name, classifier.output[0].name = graph_input, graph_output
    classifier.instance_group[0].count = spec.instances
    bounded_batching(pixels, spec)
    bounded_batching(classifier, spec)
    settings = ImageClassifierSettings(
        pixels_model=model["pixels"],
        max_image_bytes=MAX_IMAGE_BYTES,
        max_pixels=MAX_PIXELS,
        labels=json.dumps(label_names, ensure_ascii=False),
    )
    pixels_settings = replace(settings, preprocessing=PREPROCESSING, parameters_from=model["entry"])
    own = {"instances": spec.instances} if "instances" in spec.given else {}
    return [
        ("image-entry", ServedModel(entry.name, entry, settings), {}),
        ("image-pixels", ServedModel(pixels.name, pixels, pixels_settings, PREPROCESS_ADAPTER, files[pixels.name]), {}),
        ("image-graph", ServedModel(classifier.name, classifier, files=files[classifier.name]), own),
    ]


def image_files(spec: ModelSpec) -> dict[str, dict[str, Path]]:
    """The preprocessing the pixels model loads, and the graph and checkpoint the classifier's profile may serve; of
    a spec of pixels, the cost model its entry prices merges by, and the backbone's graph and checkpoint."""
    folder = export_dir(spec)
    model = names(spec)
    if spec.input == "pixels":
        cost = {COST_MODEL: folder / COST_MODEL} if spec.merge_policy == "cost" else {}
        backbone = {file: folder / file for file in BACKBONE_FILES if (folder / file).exists()}
        return {model["entry"]: cost, model["backbone"]: backbone}
    graph = {file: folder / file for file in CLASSIFIER_FILES if (folder / file).exists()}
    return {model["pixels"]: {PREPROCESSING: folder / PREPROCESSING}, model["classifier"]: graph}


def check_image(spec: ModelSpec) -> str:
    """`kit add`'s check: the export, its preprocessing against the processor and its graph against PyTorch (of
    pixels: the padded graph against PyTorch on each image alone)."""
    meta = export(spec)
    label_names = checkpoint_labels(spec, meta)
    if spec.input == "pixels":
        cost = ", its run times measured for the cost policy" if spec.merge_policy == "cost" else ""
        return (
            f"exported {spec.name}: padded batches through ONNX Runtime differ from PyTorch on each image alone by at most "
            f"{meta['max_abs_diff']:.3g} (atol {meta['atol']:g}){cost}; {len(label_names)} labels"
        )
    return (
        f"exported {spec.name}: preprocessing differs from the checkpoint's processor by at most "
        f"{meta['preprocessing_max_abs_diff']:.3g}, ONNX Runtime from PyTorch by at most {meta['max_abs_diff']:.3g} "
        f"(atol {meta['atol']:g}); {meta['height']}x{meta['width']} pixels; labels {', '.join(label_names)}"
    )
