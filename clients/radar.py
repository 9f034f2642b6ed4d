"""Classify text files with the kit's `radar` model: AI-generated probability per file and per chunk.

    python -m clients.radar --url localhost:8001 --protocol grpc essay.txt notes/*.txt
    python -m clients.radar --protocol http --concurrency 16 --json *.txt
    python -m clients.radar --protocol door --url http://localhost:8080 essay.txt   # through the front door

Files are sent concurrently (threads over one client, or asyncio with --asyncio), so that the
server's dynamic batcher can merge the chunks of different files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np
from tritonclient.utils import InferenceServerException

from clients.base import DEFAULT_URLS, PROTOCOLS, AsyncModelClient, ModelClient, add_api_key
from clients.results import RADAR_OUTPUTS, RadarResult
from clients.triton import RetryPolicy

MODEL = "radar"
OUTPUTS = RADAR_OUTPUTS


def text_tensor(text: str | bytes) -> dict[str, np.ndarray]:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return {"TEXT": np.array([raw], dtype=np.object_)}


class RadarClient(ModelClient):
    """Thread-safe synchronous client; `classify_many` keeps `concurrency` requests in flight."""

    def __init__(
        self,
        url: str,
        protocol: str = "grpc",
        concurrency: int = 8,
        retry: RetryPolicy = RetryPolicy(),
        api_key: str | None = None,
    ):
        super().__init__(MODEL, OUTPUTS, url, protocol, concurrency, retry=retry, api_key=api_key)

    def classify(self, text: str | bytes) -> RadarResult:
        if self.door:
            return self.door.classify(text.decode("utf-8") if isinstance(text, bytes) else text)
        return RadarResult.from_outputs(self.infer(text_tensor(text)))

    def classify_many(self, texts: list[str | bytes]) -> list[RadarResult | InferenceServerException]:
        return self.map(self.classify, texts)


class AsyncRadarClient(AsyncModelClient):
    """asyncio client for services that already run an event loop."""

    def __init__(self, url: str, protocol: str = "grpc", retry: RetryPolicy = RetryPolicy(), api_key: str | None = None):
        super().__init__(MODEL, OUTPUTS, url, protocol, retry=retry, api_key=api_key)

    async def classify(self, text: str | bytes) -> RadarResult:
        if self.door:
            return await self.through_door(self.door.classify, text.decode("utf-8") if isinstance(text, bytes) else text)
        return RadarResult.from_outputs(await self.infer(text_tensor(text)))

    async def classify_many(self, texts: list[str | bytes], concurrency: int = 8) -> list:
        return await self.map(self.classify, texts, concurrency)


async def classify_async(args, texts):
    client = AsyncRadarClient(args.url, args.protocol, api_key=args.api_key)
    try:
        return await client.classify_many(texts, args.concurrency)
    finally:
        await client.close()


def report(path: Path, text: str, result, as_json: bool) -> str:
    if isinstance(result, Exception):
        message = result.message() if isinstance(result, InferenceServerException) else str(result)
        return json.dumps({"file": str(path), "error": message}) if as_json else f"{path}: error: {message}"
    if as_json:
        return json.dumps(
            {
                "file": str(path),
                "score": result.score,
                "chunks": [{"start": s, "end": e, "score": c} for (s, e), c in zip(result.chunk_spans, result.chunk_scores)],
            },
            ensure_ascii=False,
        )
    lines = [f"{path}: AI-generated probability {result.score:.4f} ({len(result.chunk_scores)} chunks)"]
    for (start, end), score in zip(result.chunk_spans, result.chunk_scores):
        preview = text[start:end].replace("\n", " ")
        preview = preview if len(preview) <= 48 else preview[:45] + "..."
        lines.append(f"  [{start:>6}, {end:>6})  {score:.4f}  {preview}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--protocol", choices=PROTOCOLS, default="grpc")
    parser.add_argument(
        "--url", help="host:port for grpc (default localhost:8001) and http (localhost:8000); the door's URL for door"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default 8)")
    add_api_key(parser)
    parser.add_argument("--asyncio", action="store_true", help="use the asyncio client instead of threads")
    parser.add_argument("--json", action="store_true", help="one JSON object per file")
    args = parser.parse_args(argv)
    args.url = args.url or DEFAULT_URLS[args.protocol]
    texts = [path.read_text(encoding="utf-8", errors="strict") for path in args.files]
    if args.asyncio:
        results = asyncio.run(classify_async(args, texts))
    else:
        client = RadarClient(args.url, args.protocol, args.concurrency, api_key=args.api_key)
        try:
            results = client.classify_many(texts)
        finally:
            client.close()
    for path, text, result in zip(args.files, texts, results):
        print(report(path, text, result, args.json))
    return 1 if any(isinstance(r, Exception) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
