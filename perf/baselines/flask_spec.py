"""The Flask design on a spec's model (perf.baselines.spec_model): the model loaded at import, run per request.

MODEL_SPEC=models/scorer.toml python -m perf.baselines.flask_spec --port 5000
"""

from __future__ import annotations

from flask import jsonify, request

from kit.pipelines.errors import InputError
from perf.baselines.flask_service import flask_service, serve
from perf.baselines.spec_model import from_env

model = from_env()
app = flask_service(__name__)


@app.post("/predict")
def predict():
    try:
        return jsonify(model.predict(request.get_json(force=True, silent=True)))
    except InputError as exc:
        return jsonify(error=str(exc)), 400


if __name__ == "__main__":
    serve(app, __doc__)
