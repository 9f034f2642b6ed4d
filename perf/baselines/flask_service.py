"""What both Flask baselines share, as their field report ran them: the app with its health route, and Flask's own
threaded server behind `python -m` with keep-alive connections."""

from __future__ import annotations

import argparse

from flask import Flask
from werkzeug.serving import WSGIRequestHandler


def flask_service(name: str) -> Flask:
    app = Flask(name)

    @app.get("/health")
    def health():
        return {"status": "ok"}

    return app


def serve(app: Flask, description: str) -> None:
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args()
    # Keep-alive, as behind any real proxy; with HTTP/1.0 every request opens a new connection.
    WSGIRequestHandler.protocol_version = "HTTP/1.1"
    WSGIRequestHandler.disable_nagle_algorithm = True  # headers and body go out in separate writes
    app.run(args.host, args.port, threaded=True)
