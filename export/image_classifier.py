"""Export a Hugging Face image classifier (ViT, ConvNeXt, ...: whatever AutoModelForImageClassification loads) to ONNX
for Triton, validated against PyTorch, with the preprocessing the server applies without transformers or PyTorch.

Loads the checkpoint and its image processor (PIL backend) as a user would (a hub id such as
google/vit-base-patch16-224, or a local directory), derives a `Preprocessing` (kit.pipelines.image_processing) from
the processor's settings and checks it against the processor itself on generated images of mixed sizes and aspect
ratios; a processor whose settings or code it cannot reproduce is refused, naming what. The graph takes
`pixel_values` FP32 [batch_size, 3, height, width] as that preprocessing makes them and returns `scores` FP32
[batch_size, num_labels], the softmax of the logits; ONNX Runtime is compared with PyTorch on batches of 1 and 3
images and the export fails above --atol. The graph is made from the module the PyTorch runner serves the saved
checkpoint with (kit.runners.torch_models.ImageProbabilities). Writes into --out: model.onnx, checkpoint/,
preprocessing.json and export.json (labels, the graph's size, both checks' differences), the last only when every
check passed.

    python -m export.image_classifier --model google/vit-base-patch16-224 --out artifacts/models/NAME
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import torch
import transformers
from PIL import Image
from transformers import AutoConfig, AutoImageProcessor, AutoModelForImageClassification, ConvNextImageProcessorPil
from transformers.image_processing_backends import PilBackend
from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES

from export.onnx_validate import TensorSpec, ValidationError, abs_diffs, check_signature, opset, provenance, require_close, sha256
from export.text_checkpoint import ExportError
from export.text_model import DEFAULT_ATOL, DEFAULT_OPSET, needs_external_data
from kit.pipelines.errors import InputError
from kit.pipelines.image_processing import CONVNEXT_WARP_EDGE, Preprocessing
from kit.runners.torch_models import ImageProbabilities

TASK = "image-classification"
INPUT_NAME, OUTPUT_NAME = "pixel_values", "scores"
PREPROCESSING_FILE = "preprocessing.json"
CHECKPOINT = "checkpoint"  # the model saved for the PyTorch runner (the gpu-embedded profile), which wraps it alike
# The derived preprocessing must give the processor's pixel values up to float rounding.
PREPROCESSING_ATOL = 1e-4
# (height, width) of the generated images: small, square, large, thin, odd, both orientations.
SAMPLE_SIZES = ((17, 40), (64, 64), (300, 120), (33, 77), (91, 41))
SAMPLE_SEED = 0
# The processor's steps the Preprocessing reproduces; do_convert_rgb: the server converts every image to RGB first.
STEPS = {"do_resize", "do_center_crop", "do_rescale", "do_normalize", "do_convert_rgb"}
LABELS_ONLY = {"do_reduce_labels"}  # acts on segmentation maps only, never on pixels
# PilBackend's methods that compute pixels: a processor that replaces one has arithmetic of its own, except
# ConvNeXt's resize (crop_pct), which Preprocessing reproduces.
PIXEL_METHODS = ("preprocess", "_preprocess", "process_image", "resize", "center_crop", "rescale", "normalize")
CONVNEXT_METHODS = {"resize", "_preprocess"}
UNSUPPORTED_SIZE_KEYS = ("longest_edge", "max_height", "max_width", "min_pixels", "max_pixels")


def step(message: str) -> None:
    print(f"[export.image_classifier] {message}", file=sys.stderr, flush=True)


def load(source: str) -> tuple[PilBackend, torch.nn.Module]:
    """The image processor (PIL backend, what the server mimics) and the classifier in fp32."""
    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError, KeyError) as exc:  # missing directory, unknown hub id or model type, no network
        raise ExportError(f"cannot load {source}: {exc}") from exc
    if config.model_type not in MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES:
        architectures = ", ".join(config.architectures or []) or "no architecture named"
        raise ExportError(f"{source} is a {config.model_type} checkpoint ({architectures}), not an image classifier")
    try:
        model = AutoModelForImageClassification.from_pretrained(source, dtype=torch.float32).eval()
        processor = AutoImageProcessor.from_pretrained(source, backend="pil")
    except (OSError, ValueError, KeyError) as exc:  # e.g. no preprocessor_config.json
        raise ExportError(f"cannot load {source} as an image classifier with its image processor: {exc}") from exc
    if not isinstance(processor, PilBackend):
        raise ExportError(f"{source}'s image processor {type(processor).__name__} has no PIL backend, which the kit mimics")
    return processor, model


def derive_preprocessing(processor: PilBackend) -> Preprocessing:
    """The processor's settings as a Preprocessing; what it cannot reproduce is refused, naming the setting."""
    name = type(processor).__name__
    convnext = isinstance(processor, ConvNextImageProcessorPil)
    own = [m for m in PIXEL_METHODS if getattr(type(processor), m) is not getattr(PilBackend, m)]
    own = [m for m in own if not (convnext and m in CONVNEXT_METHODS)]
    if own:
        raise ExportError(f"{name} computes pixels in code of its own ({', '.join(own)}), which the kit does not reproduce")
    steps = sorted(k for k in dir(processor) if k.startswith("do_") and getattr(processor, k) and k not in STEPS | LABELS_ONLY)
    if steps:
        raise ExportError(f"{name} sets {', '.join(steps)}, which the kit does not reproduce")
    resample = Image.Resampling.BILINEAR if processor.resample is None else processor.resample
    if not isinstance(resample, int) or int(resample) not in set(Image.Resampling):
        raise ExportError(f"{name}'s resample {resample!r} is not a PIL filter")
    fields: dict = {"resample": int(resample)}
    shape = None  # (height, width) of what the steps so far make; None while it follows the image's
    if processor.do_resize:
        size = processor.size
        extra = [f"size.{key}" for key in UNSUPPORTED_SIZE_KEYS if getattr(size, key, None)]
        if extra:
            raise ExportError(f"{name} sets {', '.join(extra)}, which the kit does not reproduce")
        if convnext:
            if not size.shortest_edge or not processor.crop_pct or processor.crop_pct <= 0:
                raise ExportError(f"{name} needs size.shortest_edge and a positive crop_pct, got {size} and {processor.crop_pct}")
            fields |= {"shortest_edge": size.shortest_edge, "crop_pct": float(processor.crop_pct)}
            shape = (size.shortest_edge, size.shortest_edge)
            how = (
                "without a crop"
                if size.shortest_edge >= CONVNEXT_WARP_EDGE
                else f"after resizing by crop_pct {processor.crop_pct:g}"
            )
            step(f"  ConvNeXt resize: to {size.shortest_edge}x{size.shortest_edge} {how}")
        elif size.height and size.width:
            fields |= {"resize_height": size.height, "resize_width": size.width}
            shape = (size.height, size.width)
        elif size.shortest_edge:
            fields["shortest_edge"] = size.shortest_edge
        else:
            raise ExportError(f"{name}'s size {size} names neither height and width nor shortest_edge")
    if processor.do_center_crop:
        crop = processor.crop_size
        if not (crop and crop.height and crop.width):
            raise ExportError(f"{name} centre-crops without crop_size height and width, got {crop}")
        fields |= {"crop_height": crop.height, "crop_width": crop.width}
        shape = (crop.height, crop.width)
    if shape is None:
        raise ExportError(
            f"{name} gives no fixed image size (do_resize {processor.do_resize}, size {processor.size}, "
            f"do_center_crop {processor.do_center_crop}); the graph takes one"
        )
    if processor.do_rescale:
        fields["rescale_factor"] = float(processor.rescale_factor)
    if processor.do_normalize:
        for key in ("image_mean", "image_std"):
            value = getattr(processor, key)
            values = [float(value)] * 3 if isinstance(value, int | float) else [float(v) for v in value]
            if len(values) != 3:
                raise ExportError(f"{name}'s {key} has {len(values)} values; RGB images need 3")
            fields[key.removeprefix("image_")] = tuple(values)
    return Preprocessing(height=shape[0], width=shape[1], **fields)


def sample_images(sizes: tuple[tuple[int, int], ...] = SAMPLE_SIZES, seed: int = SAMPLE_SEED) -> list[Image.Image]:
    """RGB images of the given (height, width): a coarse random pattern smoothly upscaled, with a little noise, so
    that resampling filters disagree about as much as on photographs."""
    rng = np.random.default_rng(seed)
    images = []
    for height, width in sizes:
        coarse = Image.fromarray(rng.integers(0, 256, (5, 5, 3), dtype=np.uint8))
        smooth = np.asarray(coarse.resize((width, height), Image.Resampling.BICUBIC), dtype=np.int16)
        noise = rng.integers(-12, 13, (height, width, 3), dtype=np.int16)
        images.append(Image.fromarray(np.clip(smooth + noise, 0, 255).astype(np.uint8), "RGB"))
    return images


def check_preprocessing(
    processor: PilBackend, preprocessing: Preprocessing, images: list[Image.Image], atol: float = PREPROCESSING_ATOL
) -> float:
    """Max abs difference of the preprocessing's pixel values from the processor's on `images`; raises above atol."""
    want = processor(images=images, return_tensors="np")["pixel_values"]
    try:
        got = np.stack([preprocessing(image) for image in images])
    except InputError as exc:
        raise ValidationError(f"the derived preprocessing fails where {type(processor).__name__} does not: {exc}") from None
    if got.shape != want.shape:
        raise ValidationError(f"the derived preprocessing makes {got.shape}, {type(processor).__name__} {want.shape}")
    diff = float(np.max(np.abs(got.astype(np.float64) - want)))
    if not np.isfinite(diff) or diff > atol:
        sizes = ", ".join(f"{image.height}x{image.width}" for image in images)
        raise ValidationError(
            f"the derived preprocessing differs from {type(processor).__name__} by up to {diff:.3g} (max abs) "
            f"on images of {sizes}, above {atol:g}"
        )
    return diff


def export_onnx(module: ImageProbabilities, example: np.ndarray, path: Path, opset_version: int, external_data: bool) -> None:
    """torch's dynamo exporter, the batch axis named batch_size; height and width stay the preprocessing's."""
    with torch.no_grad():
        program = torch.onnx.export(
            module,
            (torch.from_numpy(example),),
            dynamo=True,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            opset_version=opset_version,
            dynamic_shapes={INPUT_NAME: {0: torch.export.Dim("batch_size")}},
        )
    path.with_name(path.name + ".data").unlink(missing_ok=True)  # a stale weights file must not linger
    program.save(str(path), external_data=external_data)


def expected_signature(height: int, width: int, num_labels: int) -> tuple[list[TensorSpec], list[TensorSpec]]:
    inputs = [TensorSpec(INPUT_NAME, np.dtype(np.float32), ("batch_size", 3, height, width))]
    return inputs, [TensorSpec(OUTPUT_NAME, np.dtype(np.float32), ("batch_size", num_labels))]


def export(source: str, out: Path, atol: float = DEFAULT_ATOL, opset_version: int = DEFAULT_OPSET) -> dict:
    """Export, check and describe; export.json is written last, only when every check passed."""
    step(f"loading {source}")
    processor, model = load(source)
    step(f"deriving the preprocessing from {type(processor).__name__}")
    preprocessing = derive_preprocessing(processor)
    height, width = preprocessing.height, preprocessing.width
    images = sample_images()
    step(f"checking it against the processor on {len(images)} generated images (atol {PREPROCESSING_ATOL:g})")
    preprocessing_diff = check_preprocessing(processor, preprocessing, images)
    step(f"  {height}x{width} pixel values, max abs diff {preprocessing_diff:.3g}")
    out.mkdir(parents=True, exist_ok=True)
    for name in ("export.json", PREPROCESSING_FILE):  # an earlier export's must not describe this one's graph
        (out / name).unlink(missing_ok=True)
    pixels = np.stack([preprocessing(image) for image in images])
    batches = [pixels[:1], pixels[1:4]]
    module = ImageProbabilities(model).eval()
    try:
        with torch.no_grad():
            expected = [module(torch.from_numpy(batch)).numpy() for batch in batches]
    except (RuntimeError, ValueError) as exc:  # e.g. a ViT whose processor's size is not the model's
        raise ExportError(f"PyTorch cannot run {source} on {height}x{width} images ({type(exc).__name__}: {exc})") from exc
    num_labels = model.config.num_labels
    path = out / "model.onnx"
    external = needs_external_data(model)
    step(f"exporting to {path} (opset {opset_version}, external data: {external})")
    export_onnx(module, batches[1], path, opset_version, external)
    check_signature(path, *expected_signature(height, width, num_labels))
    step(f"validating ONNX Runtime against PyTorch on batches of {' and '.join(str(len(b)) for b in batches)} (atol {atol:g})")
    diffs = abs_diffs(path, [{INPUT_NAME: batch} for batch in batches], [{OUTPUT_NAME: want} for want in expected])
    max_abs_diff = require_close(diffs, atol)
    step(f"  max abs diff {max_abs_diff:.3g}")
    step(f"saving the checkpoint into {out / CHECKPOINT} (the PyTorch runner's)")
    model.save_pretrained(out / CHECKPOINT)
    preprocessing.save(out / PREPROCESSING_FILE)
    meta = {
        "task": TASK,
        "source": source,
        "model_type": model.config.model_type,
        "image_processor": type(processor).__name__.removesuffix("Pil"),
        "num_labels": num_labels,
        "id2label": {str(index): label for index, label in model.config.id2label.items()},
        "height": height,
        "width": width,
        "inputs": [INPUT_NAME],
        "outputs": [OUTPUT_NAME],
        "preprocessing": PREPROCESSING_FILE,
        "checkpoint": CHECKPOINT,
        "preprocessing_max_abs_diff": preprocessing_diff,
        "preprocessing_atol": PREPROCESSING_ATOL,
        "max_abs_diff": max_abs_diff,
        "atol": atol,
        "opset": opset(path),
        "external_data": path.name + ".data" if external else None,
        "onnx_sha256": sha256(path),
        **provenance(torch, transformers, onnx, onnxruntime),
    }
    (out / "export.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="hub id or local checkpoint directory (model and image processor)")
    parser.add_argument("--out", type=Path, required=True, help="directory for model.onnx, preprocessing.json, export.json")
    parser.add_argument("--atol", type=float, default=DEFAULT_ATOL, help="max abs probability difference allowed")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    args = parser.parse_args(argv)
    try:
        meta = export(args.model, args.out, args.atol, args.opset)
    except (ExportError, ValidationError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)  # one line: a caller reports the last
        return 1
    print(
        f"exported {args.model} ({TASK}, {meta['num_labels']} labels, {meta['height']}x{meta['width']}) to "
        f"{args.out / 'model.onnx'}: preprocessing max abs diff {meta['preprocessing_max_abs_diff']:.3g} <= "
        f"{PREPROCESSING_ATOL:g}, ONNX max abs diff {meta['max_abs_diff']:.3g} <= atol {args.atol:g}, opset {meta['opset']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
