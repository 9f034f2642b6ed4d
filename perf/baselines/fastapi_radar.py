"""The FastAPI design: the model loaded at import, a plain `def` endpoint run in FastAPI's thread pool.

    uvicorn perf.baselines.fastapi_radar:app --port 8080 --workers 2

Each uvicorn worker process loads its own copy of the model.
"""

from __future__ import annotations

from perf.baselines.radar_model import from_env
from perf.baselines.service import TextIn, refusing_bad_input, service

model = from_env()
app = service()


@app.post("/predict")
def predict(body: TextIn):
    return refusing_bad_input(lambda: model.classify(body.text))
