"""Detector sizing policies on pages rendered by a real browser: accuracy first, detector time second.

Every policy reads the same rendered corpus (samples.renderings: articles light and dark, notices,
receipts, invoice tables, mixed Chinese/English/digits, health-code screens of each colour; phone
and desktop widths; some JPEG) with the kit's OCR pipeline in this process, the committed `ocr`
parameters and only `det_sizing` and its knobs changed. Per policy: character accuracy with and
without spaces, per kind of page; detector time and whole-pipeline time per image (one thread, one
image at a time); and whether the health-code reader gets every screen's colour and fields right.
The adopted policy is the one `model_repository/ocr.toml` names.

    python -m perf.probes.ocr_sizing --per-kind 6 --out perf/results/ocr/sizing.json
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from kit.pipelines.encoded_images import decode_image
from ocr.health_code import find_qr, read_health_code
from ocr.pipeline import OcrPipeline
from ocr.reader import NetworkEngines
from ocr.recognize import character_table
from perf.baselines.ocr_model import ocr_engines, ocr_settings
from perf.probes.output import emit
from samples.renderings import Rendering, corpus
from samples.scoring import character_errors

PAD = {"crop_pad": 0.3}
POLICIES = {
    "rapidocr (RapidOCR's default)": {"det_sizing": "rapidocr", "crop_pad": 0.0},
    "rapidocr, crop_pad 0.3": {"det_sizing": "rapidocr", **PAD},
    "max_side 960, crop_pad 0.3": {"det_sizing": "max_side", "det_max_side": 960, **PAD},
    "max_side 1280, crop_pad 0.3": {"det_sizing": "max_side", "det_max_side": 1280, **PAD},
    "max_side 1600, crop_pad 0.3": {"det_sizing": "max_side", "det_max_side": 1600, **PAD},
    "text_height 24, crop_pad 0.3": {"det_sizing": "text_height", "det_max_side": 960, "det_text_height": 24, **PAD},
    "text_height 32, crop_pad 0.3": {"det_sizing": "text_height", "det_max_side": 960, "det_text_height": 32, **PAD},
    "text_height 40, crop_pad 0.3": {"det_sizing": "text_height", "det_max_side": 960, "det_text_height": 40, **PAD},
    "text_height 32, crop_pad 0.2": {"det_sizing": "text_height", "det_max_side": 960, "det_text_height": 32, "crop_pad": 0.2},
    "text_height 32, crop_pad 0.4": {"det_sizing": "text_height", "det_max_side": 960, "det_text_height": 32, "crop_pad": 0.4},
}


class TimedEngines:
    """The in-process engines, with the detector's time summed."""

    def __init__(self, engines: NetworkEngines):
        self.engines, self.detect_s = engines, 0.0

    async def detect(self, images):
        start = time.perf_counter()
        try:
            return await self.engines.detect(images)
        finally:
            self.detect_s += time.perf_counter() - start

    async def classify(self, crops):
        return await self.engines.classify(crops)

    async def recognize(self, crops):
        return await self.engines.recognize(crops)


def code_right(page: Rendering, image: np.ndarray, texts: list[str]) -> bool:
    read = read_health_code(image, find_qr(image), texts)
    want = page.code
    return (read["color"], read["qr"], *(read["fields"][k] for k in ("name", "datetime", "status"))) == (
        want["color"],
        want["qr"],
        want["name"],
        want["datetime"],
        want["status"],
    )


def measure_policy(pipeline: OcrPipeline, engines: NetworkEngines, pages: list[Rendering], images: list[np.ndarray]) -> dict:
    timed = TimedEngines(engines)
    errors: dict[str, list[int]] = {}
    codes_right = codes = 0
    start = time.perf_counter()
    for page, image in zip(pages, images, strict=True):
        texts = asyncio.run(pipeline.read(image, timed)).texts
        for spaces in (True, False):
            e, n = character_errors(texts, page.lines, spaces)
            for key in (("all", spaces), (page.kind, spaces)):
                errors.setdefault(key, [0, 0])
                errors[key][0] += e
                errors[key][1] += n
        if page.code:
            codes += 1
            codes_right += code_right(page, image, texts)
    total_s = time.perf_counter() - start
    accuracy = {f"{kind}{'' if spaces else ' (no spaces)'}": round(1 - e / n, 4) for (kind, spaces), (e, n) in errors.items()}
    return {
        "accuracy": accuracy["all"],
        "accuracy_no_spaces": accuracy["all (no spaces)"],
        "by_kind": {k: v for k, v in accuracy.items() if not k.startswith("all") and "no spaces" not in k},
        "detector_ms_per_image": round(timed.detect_s / len(pages) * 1000, 1),
        "pipeline_ms_per_image": round(total_s / len(pages) * 1000, 1),
        "health_codes_right": f"{codes_right}/{codes}",
    }


def measure(artifacts: Path, per_kind: int, seed: int, policies: dict[str, dict]) -> dict:
    settings = ocr_settings().pipeline
    adopted = {k: getattr(settings, k) for k in ("det_sizing", "det_max_side", "det_text_height", "crop_pad")}
    print(f"rendering {per_kind} page(s) of each kind (seed {seed}) in headless chromium", flush=True)
    pages = corpus(per_kind, seed)
    images = [decode_image(p.data) for p in pages]
    characters = character_table((artifacts / "rec" / "characters.txt").read_text(encoding="utf-8").splitlines())
    engines = ocr_engines(artifacts, threads=1)
    results = {}
    for name, change in policies.items():
        pipeline = OcrPipeline(characters, replace(settings, **change))
        results[name] = measure_policy(pipeline, engines, pages, images)
        print(f"{name}: {results[name]}", flush=True)
    reference = results[next(iter(policies))]
    for result in results.values():
        result["accuracy_points_over_rapidocr"] = round(100 * (result["accuracy"] - reference["accuracy"]), 1)
        result["detector_time_vs_rapidocr"] = round(result["detector_ms_per_image"] / reference["detector_ms_per_image"], 2)
    return {
        "pages": len(pages),
        "kinds": sorted({p.kind for p in pages}),
        "widths_px": sorted({p.size[0] for p in pages}),
        "seed": seed,
        "adopted": adopted,
        "policies": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts/ocr"))
    parser.add_argument("--per-kind", type=int, default=6, help="pages of each kind (9 kinds)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    emit(measure(args.artifacts, args.per_kind, args.seed, POLICIES), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
