"""Read health-code screenshots with the kit's `health_code` model: one JSON object per image.

    python -m clients.health_code --url localhost:8001 --protocol grpc code.png
    python -m clients.health_code --base64 --url localhost:8000 --concurrency 16 shots/*.jpg

Each line is {"file", "color" (green/yellow/red/unknown), "qr", "texts", "fields": {"name",
"datetime", "status"}}, or {"file", "error"} for an image the server refused.
"""

from __future__ import annotations

import json
import sys

from clients.ocr import ImageClient, error_text, image_tensor, parse_args, parser_for


class HealthCodeClient(ImageClient):
    """Thread-safe synchronous client of `health_code`; `read_many` keeps `concurrency` requests in flight."""

    model, outputs = "health_code", ["RESULT"]

    def read(self, data: bytes) -> dict:
        if self.door:
            return self.door.health_code(data)
        return json.loads(self.infer(image_tensor(data))["RESULT"].reshape(-1)[0])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(parser_for(__doc__), argv)
    client = HealthCodeClient(args.url, args.protocol, args.concurrency, args.base64, api_key=args.api_key)
    try:
        results = client.read_many([path.read_bytes() for path in args.images])
    finally:
        client.close()
    for path, result in zip(args.images, results):
        body = {"error": error_text(result)} if isinstance(result, Exception) else result
        print(json.dumps({"file": str(path), **body}, ensure_ascii=False))
    return 1 if any(isinstance(r, Exception) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
