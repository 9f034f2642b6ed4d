"""The Flask design: the model loaded at import, called per request.

    python -m perf.baselines.flask_radar --port 5000                              # Flask's threaded server
    gunicorn -k gthread -w 2 --threads 4 perf.baselines.flask_radar:app           # gunicorn workers x threads

Each gunicorn worker imports this module and so loads its own copy of the model.
"""

from __future__ import annotations

from flask import jsonify, request

from kit.pipelines.errors import InputError
from perf.baselines.flask_service import flask_service, serve
from perf.baselines.radar_model import from_env

model = from_env()
app = flask_service(__name__)


@app.post("/predict")
def predict():
    body = request.get_json(force=True, silent=True) or {}
    if not isinstance(body.get("text"), str):
        return jsonify(error="the body must be a JSON object with a string field 'text'"), 400
    try:
        return jsonify(model.classify(body["text"]))
    except InputError as exc:
        return jsonify(error=str(exc)), 400


if __name__ == "__main__":
    serve(app, __doc__)
