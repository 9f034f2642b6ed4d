"""The `health_code` model's pipeline (model_repository/health_code.toml, the `pipeline` task): a health-code
screenshot in, one JSON document out: {"color": green|yellow|red|unknown, "qr": payload or null, "texts": [...],
"fields": {"name", "datetime", "status"}} (health_code.schema.json). The QR code and its colour are read here
(ocr.health_code) while the OCR pipeline reads the texts with `ocr`'s networks: the image is decoded
once."""

import asyncio
import json

import numpy as np

from ocr.health_code import find_qr, read_health_code
from ocr.reader import CHARACTERS, IMAGE, OCR_NETWORKS, ReaderSettings, TextReader

NETWORKS = OCR_NETWORKS
INPUTS = IMAGE
OUTPUTS = {"RESULT": ("BYTES", [1])}
SETTINGS = ReaderSettings


def load(settings, folder):
    reader = TextReader(settings, folder / CHARACTERS)

    async def run(inputs, networks):
        image = reader.image(inputs["IMAGE"])
        # The QR detector releases the GIL: it runs in a thread while the networks read the texts.
        qr = asyncio.get_running_loop().run_in_executor(None, find_qr, image)
        lines, qr = await asyncio.gather(reader.read(image, networks), qr)
        result = read_health_code(image, qr, lines.texts)
        return {"RESULT": np.array([json.dumps(result, ensure_ascii=False).encode("utf-8")], dtype=np.object_)}

    return run
