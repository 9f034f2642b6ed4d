"""The `ocr` model's pipeline (model_repository/ocr.toml, the `pipeline` task): one encoded image in, its text lines
in reading order out, with their scores and boxes. Decoding and all pre- and post-processing run in the entry
(ocr); the three networks are awaited as calls, every width bucket of recogniser crops in flight at
once, so that the batchers of ocr_det / ocr_cls / ocr_rec merge the work of concurrent images."""

import numpy as np

from ocr.reader import CHARACTERS, IMAGE, OCR_NETWORKS, ReaderSettings, TextReader

NETWORKS = OCR_NETWORKS
INPUTS = IMAGE
OUTPUTS = {"TEXTS": ("BYTES", [-1]), "SCORES": ("FP32", [-1]), "BOXES": ("FP32", [-1, 4, 2])}
SETTINGS = ReaderSettings


def load(settings, folder):
    reader = TextReader(settings, folder / CHARACTERS)

    async def run(inputs, networks):
        result = await reader.read(reader.image(inputs["IMAGE"]), networks)
        texts = np.array([text.encode("utf-8") for text in result.texts], dtype=np.object_)
        return {"TEXTS": texts, "SCORES": result.scores, "BOXES": result.boxes}

    return run
