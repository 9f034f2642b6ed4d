"""Classify text files with the kit's `radar` model: AI-generated probability per file and per chunk.

    python -m clients.radar --url localhost:8001 --protocol grpc essay.txt notes/*.txt
    python -m clients.radar --protocol http --concurrency 16 --json *.txt

Files are sent concurrently (threads over one client, or asyncio with --asyncio), so that the
server's dynamic batcher can merge the chunks of different files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tritonclient.utils import InferenceServerException

from clients.triton import (
    DEFAULT_URLS,
    PROTOCOLS,
    Endpoint,
    RetryPolicy,
    ThreadLocalClients,
    call_with_retry,
    call_with_retry_async,
    map_concurrently,
)

MODEL = "radar"
OUTPUTS = ["SCORE", "CHUNK_SCORES", "CHUNK_SPANS"]


@dataclass
class RadarResult:
    score: float
    chunk_scores: list[float]
    chunk_spans: list[tuple[int, int]]

    @classmethod
    def from_response(cls, response) -> "RadarResult":
        spans = response.as_numpy("CHUNK_SPANS").reshape(-1, 2)
        return cls(
            score=float(response.as_numpy("SCORE")[0]),
            chunk_scores=[float(s) for s in response.as_numpy("CHUNK_SCORES")],
            chunk_spans=[(int(a), int(b)) for a, b in spans],
        )


def text_tensor(text: str | bytes) -> dict[str, np.ndarray]:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return {"TEXT": np.array([raw], dtype=np.object_)}


class RetryCounter:
    """How many times a client retried after an overload error (shared by threads or tasks)."""

    def __init__(self):
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, exc: BaseException, delay: float) -> None:
        with self._lock:
            self.count += 1


class RadarClient:
    """Thread-safe synchronous client; `classify_many` keeps `concurrency` requests in flight.

    Overload errors (gRPC UNAVAILABLE, HTTP 503, server restarting) are retried under `retry`;
    bad input (INVALID_ARG) is raised at once.
    """

    def __init__(self, url: str, protocol: str = "grpc", concurrency: int = 8, retry: RetryPolicy = RetryPolicy()):
        self.endpoint = Endpoint(url, protocol)
        self.concurrency = concurrency
        self.clients = ThreadLocalClients(self.endpoint)
        self.retry = retry
        self.retries = RetryCounter()

    def classify(self, text: str | bytes) -> RadarResult:
        inputs, outputs = self.endpoint.inputs(text_tensor(text)), self.endpoint.outputs(OUTPUTS)
        response = call_with_retry(lambda: self.clients.get().infer(MODEL, inputs, outputs=outputs), self.retry, self.retries)
        return RadarResult.from_response(response)

    def classify_many(self, texts: list[str | bytes]) -> list[RadarResult | InferenceServerException]:
        return map_concurrently(self.classify, texts, self.concurrency)

    def close(self) -> None:
        self.clients.close()


class AsyncRadarClient:
    """asyncio client for services that already run an event loop; retries overload like RadarClient."""

    def __init__(self, url: str, protocol: str = "grpc", retry: RetryPolicy = RetryPolicy()):
        self.endpoint = Endpoint(url, protocol)
        self.client = self.endpoint.client(asyncio=True)
        self.retry = retry
        self.retries = RetryCounter()

    async def classify(self, text: str | bytes) -> RadarResult:
        inputs = self.endpoint.inputs(text_tensor(text), asyncio=True)
        outputs = self.endpoint.outputs(OUTPUTS, asyncio=True)
        response = await call_with_retry_async(lambda: self.client.infer(MODEL, inputs, outputs=outputs), self.retry, self.retries)
        return RadarResult.from_response(response)

    async def classify_many(self, texts: list[str | bytes], concurrency: int = 8) -> list:
        limit = asyncio.Semaphore(concurrency)

        async def one(text):
            async with limit:
                try:
                    return await self.classify(text)
                except InferenceServerException as exc:
                    return exc

        return await asyncio.gather(*(one(t) for t in texts))

    async def close(self) -> None:
        await self.client.close()


async def classify_async(args, texts):
    client = AsyncRadarClient(args.url, args.protocol)
    try:
        return await client.classify_many(texts, args.concurrency)
    finally:
        await client.close()


def report(path: Path, text: str, result, as_json: bool) -> str:
    if isinstance(result, Exception):
        message = result.message() if isinstance(result, InferenceServerException) else str(result)
        return json.dumps({"file": str(path), "error": message}) if as_json else f"{path}: error: {message}"
    if as_json:
        return json.dumps({"file": str(path), "score": result.score, "chunks": [
            {"start": s, "end": e, "score": c} for (s, e), c in zip(result.chunk_spans, result.chunk_scores)
        ]}, ensure_ascii=False)
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
    parser.add_argument("--url", help="host:port (default: localhost:8001 for grpc, localhost:8000 for http)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default 8)")
    parser.add_argument("--asyncio", action="store_true", help="use the asyncio client instead of threads")
    parser.add_argument("--json", action="store_true", help="one JSON object per file")
    args = parser.parse_args(argv)
    args.url = args.url or DEFAULT_URLS[args.protocol]
    texts = [path.read_text(encoding="utf-8", errors="strict") for path in args.files]
    if args.asyncio:
        results = asyncio.run(classify_async(args, texts))
    else:
        client = RadarClient(args.url, args.protocol, args.concurrency)
        try:
            results = client.classify_many(texts)
        finally:
            client.close()
    for path, text, result in zip(args.files, texts, results):
        print(report(path, text, result, args.json))
    return 1 if any(isinstance(r, Exception) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
