"""Triton adapter for OCR: decode one image, run the OCR pipeline with the networks as BLS calls."""

import numpy as np

from kit.adapters.ocr import OcrReader
from kit.adapters.settings import OcrModelSettings
from kit.adapters.triton import answer


class TritonPythonModel:
    def initialize(self, args):
        self.reader = OcrReader(*OcrModelSettings.from_args(args))

    async def read(self, request):
        result = await self.reader.read(self.reader.image(request))
        return {
            "TEXTS": np.array([t.encode("utf-8") for t in result.texts], dtype=np.object_),
            "SCORES": result.scores,
            "BOXES": result.boxes,
        }

    async def execute(self, requests):
        return [await answer(self.read, request, "ocr") for request in requests]
