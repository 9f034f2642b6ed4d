"""Export a ResNet image classifier to ONNX for padded, mixed-shape batches, validated against PyTorch.

The graph takes `pixel_values` [batch, 3, height, width] (each image zero-padded at the bottom and
right to the batch's largest height and width) and `image_sizes` INT64 [batch, 2] (each image's
valid height and width), and returns `probs` [batch, num_labels] (softmax).

The graph is `PaddedResNet` (kit.runners.torch_models, which says why the sizes are needed): it
masks the padded area before every spatial operation and in the global pool, so a padded image
gives its unpadded result up to float rounding. The same module serves the checkpoint in the
PyTorch runner (kit.runners.torch), so the export also saves the weights it exported, as a
checkpoint folder (`<out>/checkpoint/`, about 100 MB for ResNet-50) that the runner loads.

Weights: `--model` takes a hub id (e.g. microsoft/resnet-50) or a local directory and loads it as
a user with network access would. Without one, a stand-in with random weights from a fixed seed:
`--size resnet50` has ResNet-50's architecture (compute per image is realistic, outputs are
meaningless); `--size tiny` is a narrow 4-stage ResNet on the same code path, for tests. The
stand-in's BatchNorm statistics are set from random images so that activations stay in range.

    python -m export.resnet --size resnet50 --out artifacts/resnet50
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import torch
import transformers
from transformers import ResNetConfig, ResNetForImageClassification

from export.onnx_validate import TensorSpec, ValidationError, abs_diffs, check_signature, opset, provenance, require_close, sha256
from export.resnet_cost import measure_cost
from kit.runners.torch_models import PaddedResNet

DEFAULT_OPSET = 18
DEFAULT_ATOL = 1e-5
CHECKPOINT = "checkpoint"
COST_MODEL = "cost.json"  # with --cost: the run times the cost merge policy predicts from (export.resnet_cost)
INPUT_NAMES = ("pixel_values", "image_sizes")
OUTPUT_NAME = "probs"
# ImageNet normalisation, what microsoft/resnet-50's image processor uses: clients send
# (pixel / 255 - mean) / std, channels first.
IMAGE_MEAN = (0.485, 0.456, 0.406)
IMAGE_STD = (0.229, 0.224, 0.225)
SIZES = {
    "resnet50": {},  # ResNetConfig's defaults are ResNet-50's (bottleneck blocks, depths 3-4-6-3)
    "tiny": {"embedding_size": 16, "hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1], "layer_type": "basic"},
}
# Padding amounts (pixels added to height and width) whose effect on the output is measured.
PADDINGS = (0, 1, 5, 31, 32, 64, 100)


class ExportError(Exception):
    """The source cannot be exported as asked; the message says why."""


def step(message: str) -> None:
    print(f"[export.resnet] {message}", file=sys.stderr, flush=True)


def make_standin(size: str, seed: int = 0) -> ResNetForImageClassification:
    """Random weights from `seed`; BatchNorm statistics from random images (one pass, cumulative
    average) so that activations keep a sane scale through the depth, as in a trained network."""
    torch.manual_seed(seed)
    model = ResNetForImageClassification(ResNetConfig(num_labels=1000, **SIZES[size]))
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for norm in norms:
        norm.momentum = None
        norm.reset_running_stats()
    model.train()
    with torch.no_grad():
        model(torch.randn(16, 3, 128, 128))
    return model.eval()


def load_model(source: str) -> ResNetForImageClassification:
    try:
        model = ResNetForImageClassification.from_pretrained(source, dtype=torch.float32)
    except OSError as exc:  # missing directory, unknown hub id, no network
        raise ExportError(f"cannot load {source}: {exc}") from exc
    return model.eval()


def pad_batch(images: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Zero-pad [3, h, w] images at the bottom/right into one batch, with their sizes."""
    height = max(image.shape[1] for image in images)
    width = max(image.shape[2] for image in images)
    batch = np.zeros((len(images), 3, height, width), dtype=np.float32)
    for row, image in enumerate(images):
        batch[row, :, : image.shape[1], : image.shape[2]] = image
    sizes = np.array([image.shape[1:] for image in images], dtype=np.int64)
    return {"pixel_values": batch, "image_sizes": sizes}


def sample_images(seed: int = 0) -> list[np.ndarray]:
    """Normalised-range random images of mixed shapes, odd and even, some far from a multiple of 32."""
    rng = np.random.default_rng(seed)
    shapes = [(224, 224), (193, 250), (67, 45), (33, 97), (128, 64)]
    return [rng.standard_normal((3, h, w), dtype=np.float32) for h, w in shapes]


def export_onnx(wrapper: PaddedResNet, example: dict[str, np.ndarray], path: Path, opset_version: int) -> None:
    """torch's dynamo exporter with named Dims, so the graph's axes are batch_size/height/width."""
    batch = torch.export.Dim("batch_size")
    dynamic = {
        "pixel_values": {0: batch, 2: torch.export.Dim("height"), 3: torch.export.Dim("width")},
        "image_sizes": {0: batch},
    }
    args = tuple(torch.from_numpy(example[name]) for name in INPUT_NAMES)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="# The axis name")
        program = torch.onnx.export(
            wrapper.eval(),
            args,
            dynamo=True,
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            opset_version=opset_version,
            dynamic_shapes=dynamic,
        )
    program.save(str(path))


def expected_signature(num_labels: int) -> tuple[list[TensorSpec], list[TensorSpec]]:
    inputs = [
        TensorSpec("pixel_values", np.dtype(np.float32), ("batch_size", 3, "height", "width")),
        TensorSpec("image_sizes", np.dtype(np.int64), ("batch_size", 2)),
    ]
    return inputs, [TensorSpec(OUTPUT_NAME, np.dtype(np.float32), ("batch_size", num_labels))]


def unpadded_probs(model: ResNetForImageClassification, images: list[np.ndarray]) -> np.ndarray:
    """The source model's own forward, one image at a time: the reference padding must not change."""
    with torch.no_grad():
        return np.concatenate([torch.softmax(model(torch.from_numpy(i[None])).logits, -1).numpy() for i in images])


def differences(got: np.ndarray, want: np.ndarray) -> dict[str, float]:
    """Max abs difference of probabilities and of log-probabilities (scale-free; underflow clipped)."""
    tiny = np.finfo(np.float32).tiny
    log_diff = np.abs(np.log(np.maximum(got, tiny)) - np.log(np.maximum(want, tiny)))
    return {"probs": float(np.max(np.abs(got - want))), "log_probs": float(np.max(log_diff))}


def padding_effect(model: ResNetForImageClassification, path: Path, image: np.ndarray) -> list[dict]:
    """Per padding amount (pixels added at the bottom and right): the exported graph run by ONNX
    Runtime padded vs unpadded (what serving does), and for comparison a PyTorch variant that
    masks only the global pool, against the source model on the unpadded image."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    sizes = np.array([image.shape[1:]], dtype=np.int64)
    alone = session.run([OUTPUT_NAME], {"pixel_values": image[None], "image_sizes": sizes})[0]
    source = unpadded_probs(model, [image])
    pool_only = PaddedResNet(model, mask_layers=False)
    rows = []
    for extra in PADDINGS:
        padded = np.zeros((1, 3, image.shape[1] + extra, image.shape[2] + extra), dtype=np.float32)
        padded[0, :, : image.shape[1], : image.shape[2]] = image
        served = session.run([OUTPUT_NAME], {"pixel_values": padded, "image_sizes": sizes})[0]
        with torch.no_grad():
            pooled = pool_only(torch.from_numpy(padded), torch.from_numpy(sizes)).numpy()
        rows.append(
            {"padding_px": extra, "served_graph": differences(served, alone), "pool_mask_only": differences(pooled, source)}
        )
    return rows


def export(
    out: Path,
    source: str | None = None,
    size: str = "resnet50",
    seed: int = 0,
    atol: float = DEFAULT_ATOL,
    opset_version: int = DEFAULT_OPSET,
) -> dict:
    """Export, validate and describe; export.json is written last, only when validation passed."""
    step(f"loading {source}" if source else f"building the {size} stand-in (seed {seed}, random weights)")
    model = load_model(source) if source else make_standin(size, seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / "export.json").unlink(missing_ok=True)
    shutil.rmtree(out / CHECKPOINT, ignore_errors=True)  # weights of an earlier export must not outlive it
    path = out / "model.onnx"
    images = sample_images(seed)
    batch = pad_batch(images)
    started = time.perf_counter()
    step(f"exporting to {path} (opset {opset_version})")
    export_onnx(PaddedResNet(model), batch, path, opset_version)
    export_s = time.perf_counter() - started
    check_signature(path, *expected_signature(model.config.num_labels))
    step(f"validating: ONNX Runtime on one padded mixed-shape batch against PyTorch per image, unpadded (atol {atol:g})")
    reference = unpadded_probs(model, images)
    diffs = abs_diffs(path, [batch], [{OUTPUT_NAME: reference}])
    max_abs_diff = require_close(diffs, atol)
    step(f"  max abs diff {max_abs_diff:.3g}; measuring the effect of padding amounts {PADDINGS}")
    effect = padding_effect(model, path, images[1])
    require_close([row["served_graph"]["probs"] for row in effect], atol)
    model.save_pretrained(out / CHECKPOINT)
    meta = {
        "source": source or f"stand-in:{size}:seed={seed}",
        "stand_in": source is None,
        "model_type": model.config.model_type,
        "layer_type": model.config.layer_type,
        "depths": list(model.config.depths),
        "num_labels": model.config.num_labels,
        "id2label": {str(i): label for i, label in model.config.id2label.items()},
        "image_mean": list(IMAGE_MEAN),
        "image_std": list(IMAGE_STD),
        "inputs": list(INPUT_NAMES),
        "outputs": [OUTPUT_NAME],
        "opset": opset(path),
        "atol": atol,
        "max_abs_diff": max_abs_diff,
        "padding_effect": effect,
        "export_seconds": round(export_s, 1),
        "onnx_sha256": sha256(path),
        "checkpoint": CHECKPOINT,
        **provenance(torch, transformers, onnx, onnxruntime),
    }
    (out / "export.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="hub id or local checkpoint directory (default: a random-weight stand-in)")
    parser.add_argument("--size", choices=sorted(SIZES), default="resnet50", help="stand-in architecture")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="directory for model.onnx, checkpoint/ and export.json")
    parser.add_argument("--atol", type=float, default=DEFAULT_ATOL, help="max abs probability difference allowed")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    parser.add_argument("--cost", action="store_true", help="also measure the run times the cost merge policy predicts from")
    parser.add_argument("--cost-threads", type=int, default=1, help="with --cost: the backbone's intra-op threads on the CPU")
    args = parser.parse_args(argv)
    try:
        meta = export(args.out, args.model, args.size, args.seed, args.atol, args.opset)
    except (ExportError, ValidationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"exported {meta['source']} to {args.out / 'model.onnx'} in {meta['export_seconds']} s: padded vs unpadded "
        f"max abs diff {meta['max_abs_diff']:.3g} <= atol {args.atol:g}, opset {meta['opset']}"
    )
    if args.cost:
        measure_cost(args.out / "model.onnx", args.out / COST_MODEL, args.cost_threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
