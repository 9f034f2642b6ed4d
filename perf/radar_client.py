"""Chunks per second that a simple concurrent client gets from the running kit's `radar` model.

    python -m perf.radar_client --url localhost:8001 --protocol grpc --concurrency 16 --texts 200

Texts follow the field report's lengths (uniform 100-800 characters). Prints and optionally
saves texts/s, chunks/s and latency percentiles; the full sweep lives in the perf kit.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from clients.radar import RadarClient
from kit.text.corpus import sample_texts


def run(url: str, protocol: str, concurrency: int, texts: list[str]) -> dict:
    client = RadarClient(url, protocol, concurrency)
    client.classify(texts[0])  # warm-up: connections, first executions

    def timed(text):
        start = time.perf_counter()
        result = client.classify(text)
        return time.perf_counter() - start, len(result.chunk_scores)

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(timed, texts))
    elapsed = time.perf_counter() - start
    client.close()
    latencies = np.array([r[0] for r in results]) * 1000
    chunks = sum(r[1] for r in results)
    return {
        "protocol": protocol,
        "concurrency": concurrency,
        "texts": len(texts),
        "chunks": chunks,
        "seconds": round(elapsed, 3),
        "texts_per_s": round(len(texts) / elapsed, 2),
        "chunks_per_s": round(chunks / elapsed, 2),
        "latency_ms": {f"p{p}": round(float(np.percentile(latencies, p)), 1) for p in (50, 90, 99)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="localhost:8001")
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    texts = sample_texts(args.texts, 100, 800, seed=42)
    rows = []
    for concurrency in args.concurrency:
        rows.append(run(args.url, args.protocol, concurrency, texts))
        print(json.dumps(rows[-1]), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
