"""The Flask design, as its field report ran it: the model loaded at import (perf.baselines.models: RADAR, OCR or a
spec's), run per request, with a health route; Flask's own threaded server behind `python -m`, keep-alive.

    BASELINE_MODEL=radar python -m perf.baselines.flask_app --port 5000                     # Flask's threaded server
    BASELINE_MODEL=radar gunicorn -k gthread -w 2 --threads 4 perf.baselines.flask_app:app  # gunicorn workers x threads

Each gunicorn worker imports this module and so loads its own copy of the model.
"""

from __future__ import annotations

import argparse

from flask import Flask, jsonify, request
from werkzeug.serving import WSGIRequestHandler

from kit.pipelines.errors import InputError
from perf.baselines.models import from_env

model = from_env()
app = Flask(__name__)


@app.get("/health")
def health():
    return {"status": "ok"}


@app.post("/predict")
def predict():
    try:
        return jsonify(model.predict(request.get_json(force=True, silent=True)))
    except InputError as exc:
        return jsonify(error=str(exc)), 400


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args()
    # Keep-alive, as behind any real proxy; with HTTP/1.0 every request opens a new connection.
    WSGIRequestHandler.protocol_version = "HTTP/1.1"
    WSGIRequestHandler.disable_nagle_algorithm = True  # headers and body go out in separate writes
    app.run(args.host, args.port, threaded=True)
