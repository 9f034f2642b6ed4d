"""The FastAPI design: the model loaded at import, a plain `def` endpoint run in FastAPI's thread pool.

    uvicorn perf.baselines.fastapi_radar:app --port 8080 --workers 2

Each uvicorn worker process loads its own copy of the model.
"""

from __future__ import annotations

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from kit.pipelines.errors import InputError
from perf.baselines.radar_model import from_env

model = from_env()
app = FastAPI()


class TextIn(BaseModel):
    text: str


@app.get("/health")
def health():
    return {"status": "ok"}


@app.post("/predict")
def predict(body: TextIn):
    try:
        return model.classify(body.text)
    except InputError as exc:
        raise HTTPException(400, str(exc)) from None
