"""The Flask design on a spec's model: the graph loaded at import, run per request.

MODEL_SPEC=models/scorer.toml python -m perf.baselines.flask_tensor --port 5000
"""

from __future__ import annotations

import argparse

from flask import Flask, jsonify, request
from werkzeug.serving import WSGIRequestHandler

from kit.pipelines.errors import InputError
from perf.baselines.tensor_model import from_env

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
    WSGIRequestHandler.protocol_version = "HTTP/1.1"  # keep-alive, as behind any real proxy
    WSGIRequestHandler.disable_nagle_algorithm = True
    app.run(args.host, args.port, threaded=True)
