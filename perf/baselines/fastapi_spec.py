"""The FastAPI + uvicorn design on a spec's model (perf.baselines.spec_model): a sync route (FastAPI runs it in its
thread pool), one model run per request.

    MODEL_SPEC=models/scorer.toml uvicorn perf.baselines.fastapi_spec:app --port 8080
"""

from __future__ import annotations

from fastapi import Body

from perf.baselines.service import refusing_bad_input, service
from perf.baselines.spec_model import from_env

model = from_env()
app = service()


@app.post("/predict")
def predict(body: dict = Body(...)):
    return refusing_bad_input(lambda: model.predict(body))
