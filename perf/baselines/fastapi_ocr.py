"""The FastAPI + uvicorn OCR service of the field report: each uvicorn worker process loads the three
models at import; a plain `def` endpoint (run in FastAPI's thread pool) reads one image per request.

    OCR_MODEL_DIR=artifacts/ocr ORT_THREADS=1 uvicorn perf.baselines.fastapi_ocr:app --port 8080 --workers 2

    POST /ocr {"image": "<base64 of a JPEG/PNG/BMP/WebP>"} -> {"lines": [{"text", "score", "box"}, ...]}

The pipeline is the kit's own, in-process (perf.baselines.ocr_model: ocr with ONNX Runtime
sessions on the exported artifacts/ocr/{det,cls,rec}/model.onnx), rather than RapidOCR(), so that
the work per image is exactly what Triton's `ocr` model does; see ocr_model for why.
"""

from __future__ import annotations

from pydantic import BaseModel

from perf.baselines.ocr_model import from_env
from perf.baselines.service import refusing_bad_input, service

model = from_env()
app = service()


class ImageIn(BaseModel):
    image: str


@app.post("/ocr")
def ocr(body: ImageIn):
    return refusing_bad_input(lambda: {"lines": model.lines(body.image.encode("utf-8"))})
