"""What the `ocr` and `health_code` pipelines share (model_repository/ocr_pipeline.py, health_code_pipeline.py):
their settings, the picture decoded from a request's IMAGE once, and the OCR pipeline reading it with the networks
of a pipeline module (kit.pipelines.custom's Networks: models of the server over BLS, or graphs in this process)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kit.pipelines.custom import Networks
from kit.pipelines.encoded_images import decode_request_image
from ocr.pipeline import OcrPipeline, OcrResult
from ocr.recognize import character_table
from ocr.settings import OcrSettings

# The networks as the export writes them (export/ocr.py), each in its folder of the export and of the entry's
# version folder; their tensors as the committed configs of ocr_det, ocr_cls and ocr_rec name them.
OCR_NETWORKS = {"det": "det/model.onnx", "cls": "cls/model.onnx", "rec": "rec/model.onnx"}
IMAGE = {"IMAGE": ("BYTES", [1])}  # one encoded image (raw bytes or base64 text)
CHARACTERS = "characters.txt"  # the recogniser's dictionary, one entry a line


@dataclass(frozen=True)
class ReaderSettings:
    """The limits an encoded image is held to before it is decoded, and how the pipeline reads it."""

    max_image_bytes: int
    max_pixels: int
    pipeline: OcrSettings = field(default_factory=OcrSettings)


class NetworkEngines:
    """ocr.pipeline.Engines over a pipeline module's networks: each call is one network call."""

    def __init__(self, networks: Networks):
        self.networks = networks

    async def detect(self, images: np.ndarray) -> np.ndarray:
        return (await self.networks.det({"image": images}))["prob_map"]

    async def classify(self, crops: np.ndarray) -> np.ndarray:
        return (await self.networks.cls({"image": crops}))["probs"]

    async def recognize(self, crops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        outputs = await self.networks.rec({"image": crops})
        return outputs["char_indices"], outputs["char_probs"]


class TextReader:
    """The OCR pipeline with the recogniser's dictionary (`characters`), built once when the entry loads."""

    def __init__(self, settings: ReaderSettings, characters: Path):
        table = character_table(Path(characters).read_text(encoding="utf-8").splitlines())
        self.settings, self.pipeline = settings, OcrPipeline(table, settings.pipeline)

    def image(self, tensor: np.ndarray) -> np.ndarray:
        """The request's picture, BGR uint8; kit.pipelines.errors.InputError when it is unusable."""
        return decode_request_image(tensor, self.settings.max_pixels, self.settings.max_image_bytes)

    async def read(self, image: np.ndarray, networks: Networks) -> OcrResult:
        return await self.pipeline.read(image, NetworkEngines(networks))
