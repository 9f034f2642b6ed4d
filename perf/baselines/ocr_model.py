"""OCR as a hand-rolled service runs it: the kit's own pipeline (kit.pipelines.ocr) with ONNX Runtime sessions in-process.

The FastAPI baseline and the limit (perf.workloads.ocr_limit) both use this, so the work per image is
the kit's: the same decoding (kit.pipelines.encoded_images), sizing, DB post-processing, crops, angle
classifier, width buckets, CTC decoding and the same exported det/cls/rec graphs, with the settings
of the committed `model_repository/ocr/config.pbtxt`. Only the serving design differs. Not
RapidOCR(): it runs the original graphs (the recogniser's full 6,625-class softmax per time step)
with batches of 6 crops padded to the widest, so its work per image is not the kit's.

Configured from the environment, as such services usually are: OCR_MODEL_DIR (export folder, with
det/ cls/ rec/), ORT_THREADS (ONNX Runtime intra-op threads per session).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from kit.adapters.ocr import ocr_pipeline
from kit.adapters.settings import OcrModelSettings
from kit.control.configs import parameters
from kit.control.tasks import canonical_config
from kit.pipelines.encoded_images import decode_image
from kit.pipelines.ocr.pipeline import OcrResult
from kit.runners.onnx import OcrEngines


class OcrModel:
    def __init__(self, model_dir: Path, threads: int):
        self.settings = OcrModelSettings.from_parameters(parameters(canonical_config("ocr")))
        self.pipeline = ocr_pipeline(model_dir / "rec" / "characters.txt", self.settings)
        self.engines = OcrEngines(model_dir, threads)

    def read(self, data: bytes) -> OcrResult:
        """Raw image bytes or their base64 text; raises kit.pipelines.errors.InputError for an image the kit
        would reject. The pipeline's model calls run one after another here (the sessions are called directly)."""
        image = decode_image(data, self.settings.max_pixels, self.settings.max_image_bytes)
        return asyncio.run(self.pipeline.read(image, self.engines))

    def lines(self, data: bytes) -> list[dict]:
        result = self.read(data)
        return [
            {"text": text, "score": float(score), "box": box.tolist()}
            for text, score, box in zip(result.texts, result.scores, result.boxes)
        ]


def from_env() -> OcrModel:
    model = OcrModel(Path(os.environ.get("OCR_MODEL_DIR", "artifacts/ocr")), threads=int(os.environ.get("ORT_THREADS", "1")))
    # The perf kit counts these lines to know that every worker process has loaded its models.
    print(f"ocr model ready in pid {os.getpid()}", file=sys.stderr, flush=True)
    return model
