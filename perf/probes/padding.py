"""Padding waste: what the length and shape buckets cost, on RADAR's chunks or on OCR's pages and crops.

    python -m perf.probes.padding radar [--model artifacts/radar] [--bucket-counts 3 5 8] [--texts 400]
    python -m perf.probes.padding radar --model artifacts/radar-large --texts 32 --seed 42 --time --batch-sizes 1 8
    python -m perf.probes.padding ocr [--artifacts artifacts/ocr] [--images 48 | --rendered 4] [--seed 500]

RADAR: every chunk of sample texts (chunked as served) padded to the buckets the repository builder chooses
for each bucket count (the CPU profile's unless --bucket-counts says otherwise), against padding every chunk to
the model's maximum and padding each request to its own longest chunk; with --time, what each count costs the
limit's one session with all cores at each batch size (on a CPU, where batching buys little, fewer padded tokens
are the larger lever). OCR: runs the exported detector in this process, as the committed `ocr` settings size
it, to get the real text crops, then compares the recogniser width buckets configured in
model_repository/ocr.toml with the best buckets for this sample, with RapidOCR's own batching (6 crops of
one image padded to the widest) and with one width for everything; and the detector's shape buckets at a few
padding limits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from kit.adapters.artifacts import text_pipeline
from kit.pipelines.batching.buckets import choose_buckets, padding_waste
from kit.pipelines.encoded_images import decode_image
from kit.pipelines.text.pipeline import chunk_text
from ocr.detect import bucket_shape
from ocr.pipeline import OcrPipeline
from ocr.recognize import MIN_REC_WIDTH, rec_width
from perf.baselines.ocr_model import ocr_engines, ocr_settings
from perf.engine.limit import CORES
from perf.probes.output import command_line, emit
from perf.workloads.radar import RADAR
from perf.workloads.radar_limit import chunk_rows, one_session
from samples.images import mixed_images
from samples.renderings import corpus
from samples.texts import sample_texts

MAX_REC_WIDTH = 1280


def radar(args: argparse.Namespace) -> dict:
    meta = json.loads((args.model / "export.json").read_text())
    tokenizer = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    max_tokens = int(meta["max_tokens"])
    texts = sample_texts(args.texts, 100, 800, seed=args.seed, multilingual=args.multilingual)
    counts = []
    for count in args.bucket_counts or [None]:
        variant = {"radar": {"parameters": {"bucket_count": str(count)}}} if count else None
        with tempfile.TemporaryDirectory(prefix="padding-") as work:
            settings = RADAR.settings(args.model, Path(work), variant)
        per_text = [[len(ids) for ids in chunk_text(tokenizer, text, settings.max_chars, max_tokens)[1]] for text in texts]
        lengths = [n for text in per_text for n in text]
        per_request_max = sum(max(t) * len(t) for t in per_text)
        rows = chunk_rows(text_pipeline(args.model, settings), texts)
        entry = {
            "bucket_count": settings.bucket_count,
            "buckets": list(settings.buckets),
            "real_tokens": sum(lengths),
            "padded_tokens": sum(len(ids) for ids, _ in rows),
            "padding_waste": {
                "chosen_buckets": round(padding_waste(lengths, settings.buckets), 4),
                "pad_to_max_tokens": round(padding_waste(lengths, [max_tokens]), 4),
                "pad_to_longest_chunk_of_each_request": round(1 - sum(lengths) / per_request_max, 4),
            },
        }
        if args.time:
            entry["limit"] = []
            for b in args.batch_sizes:
                rate, per_cpu = one_session(args.model / "model.onnx", rows, CORES, b)
                entry["limit"].append({"batch": b, "chunks_per_s": round(rate, 3), "chunks_per_cpu_s": round(per_cpu, 3)})
        counts.append(entry)
    return {
        "source": meta["source"],
        "texts": args.texts,
        "seed": args.seed,
        "chunks": len(lengths),
        "token_length_percentiles": {p: int(np.percentile(lengths, p)) for p in (5, 25, 50, 75, 95, 99, 100)},
        **({"threads": CORES} if args.time else {}),
        "bucket_counts": counts,
    }


def ocr(args: argparse.Namespace) -> dict:
    if args.rendered:
        images = [page.data for page in corpus(args.rendered, args.seed)]
    else:
        images = mixed_images(args.images, args.seed, document_widths=(640, 800, 960, 1200, 1600))
    engines = ocr_engines(args.artifacts, threads=0)
    settings = ocr_settings().pipeline
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
    sub = parser.add_subparsers(dest="workload", required=True)
    r = sub.add_parser("radar", help="RADAR's length buckets")
    r.add_argument("--model", type=Path, default=Path("artifacts/radar"), help="an export.text_model folder")
    r.add_argument("--bucket-counts", type=int, nargs="+", help="default: the CPU profile's")
    r.add_argument("--texts", type=int, default=400)
    r.add_argument("--seed", type=int, default=101, help="a different seed from the one buckets are chosen on")
    r.add_argument("--multilingual", type=float, default=0.05, help="share of texts in other scripts")
    r.add_argument("--time", action="store_true", help="also time the limit's one session at each bucket count")
    r.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    o = sub.add_parser("ocr", help="OCR's recogniser width and detector shape buckets")
    o.add_argument("--artifacts", type=Path, default=Path("artifacts/ocr"))
    o.add_argument("--images", type=int, default=48)
    o.add_argument("--rendered", type=int, help="pages of each kind rendered by chromium instead of generated images")
    o.add_argument("--seed", type=int, default=500)
    for p in (r, o):
        p.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    report = {"command": command_line("perf.probes.padding", argv), **(radar if args.workload == "radar" else ocr)(args)}
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
