"""The FastAPI + uvicorn design: the model loaded at import (perf.baselines.models: RADAR, OCR or a spec's), a sync
route (FastAPI runs it in its thread pool), one model run per request.

    BASELINE_MODEL=ocr OCR_MODEL_DIR=artifacts/ocr uvicorn perf.baselines.fastapi_app:app --port 8080 --workers 2

Each uvicorn worker process loads its own copy of the model.
"""

from __future__ import annotations

from fastapi import Body

from perf.baselines.models import from_env
from perf.baselines.service import refusing_bad_input, service

model = from_env()
app = service()


@app.post("/predict")
def predict(body: dict = Body(...)):
    return refusing_bad_input(lambda: model.predict(body))
