"""Triton adapter for health codes: the OCR pipeline reads the texts while the QR code is read here, then JSON."""

import asyncio
import json

import numpy as np

from kit.adapters.ocr import OcrReader
from kit.adapters.settings import OcrModelSettings
from kit.adapters.triton import answer
from kit.pipelines.ocr.health_code import find_qr, read_health_code


class TritonPythonModel:
    def initialize(self, args):
        self.reader = OcrReader(*OcrModelSettings.from_args(args))

    async def read(self, request):
        image = self.reader.image(request)
        # The QR detector releases the GIL: it runs in a thread while the networks read the texts.
        qr_future = asyncio.get_running_loop().run_in_executor(None, find_qr, image)
        lines, qr = await asyncio.gather(self.reader.read(image), qr_future)
        result = read_health_code(image, qr, lines.texts)
        return {"RESULT": np.array([json.dumps(result, ensure_ascii=False).encode("utf-8")], dtype=np.object_)}

    async def execute(self, requests):
        return [await answer(self.read, request, "health_code") for request in requests]
