"""Read the text in images with the kit's `ocr` model: each line's text, score and box.

    python -m clients.ocr --url localhost:8001 --protocol grpc scan.jpg receipts/*.png
    python -m clients.ocr --protocol http --concurrency 16 --json *.jpg
    python -m clients.ocr --base64 --url localhost:8000 photo.jpg     # plain HTTP/REST JSON, base64 image
    python -m clients.ocr --protocol door --url http://localhost:8080 photo.jpg   # through the front door

Images are sent as their encoded bytes (decoding happens on the server), concurrently, so that
the server's batchers merge the text crops of different images. `--base64` sends what a browser
or phone app sends: Triton's REST JSON body with the image as base64 text in a BYTES input, using
nothing but the standard library (see the README for the same request with curl).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tritonclient.utils import InferenceServerException

from clients.base import DEFAULT_URLS, PROTOCOLS, ModelClient, add_api_key, report_all
from clients.results import OcrLine
from clients.triton import RetryPolicy

OUTPUTS = ["TEXTS", "SCORES", "BOXES"]


def image_tensor(data: bytes) -> dict[str, np.ndarray]:
    """The encoded image as it is on disk: the server decodes it."""
    return {"IMAGE": np.array([data], dtype=np.object_)}


class ImageClient(ModelClient):
    """A client of an entry model that takes one encoded image (`IMAGE`); `read` turns its outputs into a result."""

    model: str
    outputs: list[str]

    def __init__(
        self,
        url: str,
        protocol: str = "grpc",
        concurrency: int = 8,
        base64_json: bool = False,
        retry: RetryPolicy = RetryPolicy(),
        api_key: str | None = None,
    ):
        super().__init__(
            self.model, self.outputs, url, protocol, concurrency, retry=retry, base64_json=base64_json, api_key=api_key
        )

    def read(self, data: bytes):
        raise NotImplementedError

    def read_many(self, images: list[bytes]) -> list:
        """Every image's result, `concurrency` in flight; a refused image yields its exception in place."""
        return self.map(self.read, images)


class OcrClient(ImageClient):
    """Thread-safe synchronous client of `ocr`; `read_many` keeps `concurrency` requests in flight."""

    model, outputs = "ocr", OUTPUTS

    def read(self, data: bytes) -> list[OcrLine]:
        if self.door:
            return self.door.read(data)
        out = self.infer(image_tensor(data))
        boxes = out["BOXES"].reshape(-1, 4, 2)
        return [
            OcrLine(t.decode("utf-8"), float(s), b.tolist()) for t, s, b in zip(out["TEXTS"].reshape(-1), out["SCORES"], boxes)
        ]


def error_text(exc: Exception) -> str:
    return exc.message() if isinstance(exc, InferenceServerException) else str(exc)


def report(path: Path, result, as_json: bool) -> str:
    if isinstance(result, Exception):
        return json.dumps({"file": str(path), "error": error_text(result)}) if as_json else f"{path}: error: {error_text(result)}"
    if as_json:
        lines = [{"text": line.text, "score": round(line.score, 4), "box": line.box} for line in result]
        return json.dumps({"file": str(path), "lines": lines}, ensure_ascii=False)
    rows = [f"{path}: {len(result)} lines"]
    for line in result:
        corners = " ".join(f"{x:.0f},{y:.0f}" for x, y in line.box)
        rows.append(f"  {line.score:.3f}  [{corners}]  {line.text}")
    return "\n".join(rows)


def parser_for(doc: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("images", nargs="+", type=Path)
    parser.add_argument("--protocol", choices=PROTOCOLS, default="grpc")
    parser.add_argument(
        "--url", help="host:port for grpc (default localhost:8001) and http (localhost:8000); the door's URL for door"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default 8)")
    parser.add_argument("--base64", action="store_true", help="plain HTTP/REST JSON with the image as base64 text")
    add_api_key(parser)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if args.base64:
        args.protocol = "http"
    args.url = args.url or DEFAULT_URLS[args.protocol]
    return args


def main(argv: list[str] | None = None) -> int:
    parser = parser_for(__doc__)
    parser.add_argument("--json", action="store_true", help="one JSON object per image")
    args = parse_args(parser, argv)
    client = OcrClient(args.url, args.protocol, args.concurrency, args.base64, api_key=args.api_key)
    images = [path.read_bytes() for path in args.images]
    return report_all(client, client.read_many, images, args.images, lambda path, result: report(path, result, args.json))


if __name__ == "__main__":
    sys.exit(main())
