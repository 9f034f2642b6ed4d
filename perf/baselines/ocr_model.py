"""OCR as a hand-rolled service runs it: the kit's own pipeline (ocr) with ONNX Runtime sessions in-process.

The FastAPI baseline and the limit (perf.workloads.ocr_limit) both use this, so the work per image is
the kit's: the same decoding (kit.pipelines.encoded_images), sizing, DB post-processing, crops, angle
classifier, width buckets, CTC decoding and the same exported det/cls/rec graphs, with the settings
of the shipped spec `model_repository/ocr.toml`, through its module's networks. Only the serving design differs. Not
RapidOCR(): it runs the original graphs (the recogniser's full 6,625-class softmax per time step)
with batches of 6 crops padded to the widest, so its work per image is not the kit's.

Configured from the environment, as such services usually are: OCR_MODEL_DIR (export folder, with
det/ cls/ rec/), ORT_THREADS (ONNX Runtime intra-op threads per session).
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from pathlib import Path

from kit.adapters.custom_pipeline import in_process_networks, load_definition
from kit.control.tasks import shipped_specs
from kit.pipelines.custom import Definition, Networks
from kit.pipelines.encoded_images import decode_image
from kit.pipelines.errors import InputError
from kit.runners.onnx import Graphs
from ocr.pipeline import OcrResult
from ocr.reader import NetworkEngines, ReaderSettings, TextReader
from perf.baselines.planned import planned


@functools.cache
def shipped_ocr() -> tuple[Definition, ReaderSettings]:
    """The served `ocr`'s module and the SETTINGS its entry reads, read once per process."""
    entry = planned(shipped_specs()["ocr"])["entry"]
    pipeline = load_definition(entry.files[entry.settings.pipeline_module])
    return pipeline, entry.settings.module_settings(pipeline.settings)


def ocr_settings() -> ReaderSettings:
    """The settings the served `ocr` reads with: its spec's."""
    return shipped_ocr()[1]


def ocr_engines(model_dir: Path, threads: int, replaced: dict[str, Path] | None = None) -> NetworkEngines:
    """The `ocr` module's networks as ONNX Runtime sessions of `threads` (0: ONNX Runtime's default) on the export in
    `model_dir` (det/ cls/ rec/), but for the graphs `replaced` gives by network (a probe's variants)."""
    pipeline = shipped_ocr()[0]
    if not replaced:
        return NetworkEngines(in_process_networks(pipeline, model_dir, threads=threads))
    paths = {name: model_dir / graph for name, graph in pipeline.networks.items()} | replaced
    return NetworkEngines(Networks(pipeline.networks, Graphs(paths, threads)))


class OcrModel:
    def __init__(self, model_dir: Path, threads: int):
        self.settings = ocr_settings()
        self.pipeline = TextReader(self.settings, model_dir / "rec" / "characters.txt").pipeline
        self.engines = ocr_engines(model_dir, threads)

    def read(self, data: bytes) -> OcrResult:
        """Raw image bytes or their base64 text; raises kit.pipelines.errors.InputError for an image the kit
        would reject. The pipeline's model calls run one after another here (the sessions are called directly)."""
        image = decode_image(data, self.settings.max_pixels, self.settings.max_image_bytes)
        return asyncio.run(self.pipeline.read(image, self.engines))

    def predict(self, body: object) -> dict:
        """A per-request design's answer to a JSON body {"image": "<base64>"}: {"lines": [{"text", "score", "box"}]}."""
        image = body.get("image") if isinstance(body, dict) else None
        if not isinstance(image, str):
            raise InputError('the body must be {"image": "<base64 of a JPEG, PNG, BMP or WebP file>"}')
        result = self.read(image.encode("utf-8"))
        lines = zip(result.texts, result.scores, result.boxes)
        return {"lines": [{"text": text, "score": float(score), "box": box.tolist()} for text, score, box in lines]}


def from_env() -> OcrModel:
    model = OcrModel(Path(os.environ.get("OCR_MODEL_DIR", "artifacts/ocr")), threads=int(os.environ.get("ORT_THREADS", "1")))
    # The perf kit counts these lines to know that every worker process has loaded its models.
    print(f"ocr model ready in pid {os.getpid()}", file=sys.stderr, flush=True)
    return model
