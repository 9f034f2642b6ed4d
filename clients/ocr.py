"""Read the text in images with the kit's `ocr` model: each line's text, score and box.

    python -m clients.ocr --url localhost:8001 --protocol grpc scan.jpg receipts/*.png
    python -m clients.ocr --protocol http --concurrency 16 --json *.jpg
    python -m clients.ocr --base64 --url localhost:8000 photo.jpg     # plain HTTP/REST JSON, base64 image

Images are sent as their encoded bytes (decoding happens on the server), concurrently, so that
the server's batchers merge the text crops of different images. `--base64` sends what a browser
or phone app sends: Triton's REST JSON body with the image as base64 text in a BYTES input, using
nothing but the standard library (see the README for the same request with curl).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tritonclient.utils import InferenceServerException

from clients.triton import DEFAULT_URLS, PROTOCOLS, Endpoint, ThreadLocalClients, map_concurrently

OUTPUTS = ["TEXTS", "SCORES", "BOXES"]


def rest_json_infer(url: str, model: str, data: bytes, outputs: list[str], timeout: float = 120) -> dict[str, np.ndarray]:
    """One inference over plain HTTP/REST JSON, the image as base64 text; errors raise InferenceServerException."""
    body = {
        "inputs": [{"name": "IMAGE", "shape": [1], "datatype": "BYTES", "data": [base64.b64encode(data).decode("ascii")]}],
        "outputs": [{"name": name} for name in outputs],
    }
    request = urllib.request.Request(
        f"http://{url}/v2/models/{model}/infer", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            document = json.load(response)
    except urllib.error.HTTPError as exc:
        raise InferenceServerException(json.loads(exc.read() or b"{}").get("error", str(exc)), str(exc.code)) from None
    result = {}
    for output in document["outputs"]:
        if output["datatype"] == "BYTES":
            values = np.array([v.encode("utf-8") for v in output["data"]], dtype=np.object_)
        else:
            values = np.array(output["data"], dtype=np.float32)
        result[output["name"]] = values.reshape(output["shape"])
    return result


class ImageModelClient:
    """One image in, named outputs out, over gRPC, HTTP (binary tensors) or HTTP/REST JSON with base64."""

    def __init__(self, model: str, outputs: list[str], url: str, protocol: str = "grpc", concurrency: int = 8,
                 base64_json: bool = False):
        if base64_json and protocol != "http":
            raise ValueError("base64 JSON is a plain HTTP/REST request: use protocol 'http'")
        self.model, self.output_names, self.url = model, outputs, url
        self.endpoint = Endpoint(url, protocol)
        self.concurrency = concurrency
        self.base64_json = base64_json
        self.clients = ThreadLocalClients(self.endpoint)

    def infer(self, data: bytes) -> dict[str, np.ndarray]:
        if self.base64_json:
            return rest_json_infer(self.url, self.model, data, self.output_names)
        inputs = self.endpoint.inputs({"IMAGE": np.array([data], dtype=np.object_)})
        response = self.clients.get().infer(self.model, inputs, outputs=self.endpoint.outputs(self.output_names))
        return {name: response.as_numpy(name) for name in self.output_names}

    def map(self, fn, images: list[bytes]) -> list:
        """`fn(image)` for every image, `concurrency` in flight; a failed request yields its exception."""
        return map_concurrently(fn, images, self.concurrency)

    def close(self) -> None:
        self.clients.close()


@dataclass
class OcrLine:
    text: str
    score: float
    box: list[list[float]]  # 4 corners [x, y], clockwise from top-left, in image pixels


class OcrClient(ImageModelClient):
    """Thread-safe synchronous client; `read_many` keeps `concurrency` requests in flight."""

    def __init__(self, url: str, protocol: str = "grpc", concurrency: int = 8, base64_json: bool = False):
        super().__init__("ocr", OUTPUTS, url, protocol, concurrency, base64_json)

    def read(self, data: bytes) -> list[OcrLine]:
        out = self.infer(data)
        boxes = out["BOXES"].reshape(-1, 4, 2)
        return [
            OcrLine(t.decode("utf-8"), float(s), b.tolist()) for t, s, b in zip(out["TEXTS"].reshape(-1), out["SCORES"], boxes)
        ]

    def read_many(self, images: list[bytes]) -> list[list[OcrLine] | InferenceServerException]:
        return self.map(self.read, images)


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
    parser.add_argument("--url", help="host:port (default: localhost:8001 for grpc, localhost:8000 for http)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default 8)")
    parser.add_argument("--base64", action="store_true", help="plain HTTP/REST JSON with the image as base64 text")
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
    client = OcrClient(args.url, args.protocol, args.concurrency, args.base64)
    try:
        results = client.read_many([path.read_bytes() for path in args.images])
    finally:
        client.close()
    for path, result in zip(args.images, results):
        print(report(path, result, args.json))
    return 1 if any(isinstance(r, Exception) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
