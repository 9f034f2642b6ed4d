"""Padding waste of the OCR shape buckets, measured on generated pages and health-code screenshots,
or on pages rendered by headless chromium (--rendered N: N of each kind, samples.renderings).

    python -m perf.probes.ocr_buckets [--artifacts artifacts/ocr] [--images 48] [--rendered 4] [--out FILE]

Runs the exported detector in this process, as the committed `ocr` settings size it, to get the
real text crops, then compares the
recogniser width buckets configured in model_repository/ocr/config.pbtxt with the best buckets
for this sample, with RapidOCR's own batching (6 crops of one image padded to the widest) and with
one width for everything; and the detector's shape buckets at a few padding limits.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import numpy as np

from kit.adapters.settings import OcrModelSettings
from kit.control.configs import load_source_config, parameters
from kit.pipelines.batching.buckets import choose_buckets, padding_waste
from kit.pipelines.ocr.detect import bucket_shape
from kit.pipelines.ocr.image import decode_image
from kit.pipelines.ocr.pipeline import OcrPipeline
from kit.pipelines.ocr.recognize import MIN_REC_WIDTH, rec_width
from kit.runners.onnx import OcrEngines
from perf.probes.output import emit
from samples.images import mixed_images
from samples.renderings import corpus

MAX_REC_WIDTH = 1280


def measure(artifacts: Path, images: list[bytes]) -> dict:
    engines = OcrEngines(artifacts)
    settings = OcrModelSettings.from_parameters(parameters(load_source_config("ocr"))).pipeline
    pipeline = OcrPipeline([], settings)
    rec_buckets, det_buckets = settings.rec_buckets, settings.det_buckets
    per_image, det_shapes = [], []
    for data in images:
        page, _, crops = asyncio.run(pipeline.find_text(decode_image(data), engines))
        det_shapes.append(page.map_size)
        per_image.append([max(MIN_REC_WIDTH, rec_width(crop)) for crop in crops])
    widths = [w for image in per_image for w in image]
    fitting = [w for w in widths if w <= MAX_REC_WIDTH]
    best = choose_buckets(fitting, len(rec_buckets), MAX_REC_WIDTH, multiple=32)
    rapid = sum(max(ws[i : i + 6]) * len(ws[i : i + 6]) for ws in map(sorted, per_image) for i in range(0, len(ws), 6))
    det_area = sum(h * w for h, w in det_shapes)
    det = {}
    for limit in (0.0, 0.1, 0.25, 0.5):
        shapes = [bucket_shape(h, w, det_buckets, limit) for h, w in det_shapes]
        det[str(limit)] = {
            "padding_waste": round(1 - det_area / sum(h * w for h, w in shapes), 4),
            "distinct_shapes": len(set(shapes)),
        }
    return {
        "images": len(images),
        "crops": len(widths),
        "width_percentiles": {p: int(np.percentile(widths, p)) for p in (5, 25, 50, 75, 95, 100)},
        "rec_buckets": {
            "configured": list(rec_buckets),
            "configured_padding_waste": round(padding_waste(fitting, rec_buckets), 4),
            "best_for_this_sample": best,
            "best_padding_waste": round(padding_waste(fitting, best), 4),
            "rapidocr_batches_of_6_padding_waste": round(1 - sum(widths) / rapid, 4),
            "single_width_padding_waste": round(padding_waste(fitting, [MAX_REC_WIDTH]), 4),
            "crops_wider_than_largest_bucket": len(widths) - len(fitting),
        },
        "det_buckets": {"configured": list(det_buckets), "distinct_exact_shapes": len(set(det_shapes)), "by_max_padding": det},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts/ocr"))
    parser.add_argument("--images", type=int, default=48)
    parser.add_argument("--rendered", type=int, help="pages of each kind rendered by chromium instead of generated images")
    parser.add_argument("--seed", type=int, default=500)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.rendered:
        images = [page.data for page in corpus(args.rendered, args.seed)]
    else:
        images = mixed_images(args.images, args.seed, document_widths=(640, 800, 960, 1200, 1600))
    report = measure(args.artifacts, images)
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
