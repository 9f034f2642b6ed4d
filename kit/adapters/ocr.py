"""What the `ocr` and `health_code` models share: the OCR pipeline with its networks as BLS calls, or in the entry's
own process (OcrModelSettings.engines)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kit.adapters.settings import OcrModelSettings
from kit.adapters.triton import infer, input_array
from kit.pipelines.encoded_images import decode_request_image
from kit.pipelines.ocr.pipeline import OcrPipeline
from kit.pipelines.ocr.recognize import character_table


def ocr_pipeline(characters: Path, settings: OcrModelSettings) -> OcrPipeline:
    """OCR with the recogniser's dictionary (characters.txt, one entry a line)."""
    return OcrPipeline(character_table(characters.read_text(encoding="utf-8").splitlines()), settings.pipeline)


class BlsEngines:
    """kit.pipelines.ocr.pipeline.Engines over the det / cls / rec models of this server."""

    def __init__(self, det: str, cls: str, rec: str):
        self.det, self.cls, self.rec = det, cls, rec

    async def detect(self, images: np.ndarray) -> np.ndarray:
        return (await infer(self.det, {"image": images}, ["prob_map"]))[0]

    async def classify(self, crops: np.ndarray) -> np.ndarray:
        return (await infer(self.cls, {"image": crops}, ["probs"]))[0]

    async def recognize(self, crops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        indices, probs = await infer(self.rec, {"image": crops}, ["char_indices", "char_probs"])
        return indices, probs


class OcrReader:
    """Decodes a request's IMAGE once and reads it with the pipeline; built once in initialize."""

    def __init__(self, settings: OcrModelSettings, version_dir):
        self.settings = settings
        self.pipeline: OcrPipeline = ocr_pipeline(version_dir / "characters.txt", settings)
        if settings.engines == "in_process":
            # onnxruntime is imported only here: the GPU container's models call the networks over BLS, without it.
            from kit.runners.onnx import OcrEngines

            self.engines = OcrEngines(version_dir, settings.intra_op_threads)
        else:
            self.engines = BlsEngines(settings.det_model, settings.cls_model, settings.rec_model)

    def image(self, request) -> np.ndarray:
        """The request's picture, BGR uint8; kit.pipelines.errors.InputError when it is unusable."""
        return decode_request_image(input_array(request, "IMAGE"), self.settings.max_pixels, self.settings.max_image_bytes)

    async def read(self, image: np.ndarray):
        return await self.pipeline.read(image, self.engines)
