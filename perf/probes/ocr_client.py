"""Images per second from a simple concurrent client of the running kit's `ocr` (or `health_code`),
beside RapidOCR's own pipeline called in this process on the same images, in the same run.

    python -m perf.probes.ocr_client --url localhost:8001 --concurrency 1 4 8 16 --images 48

Images are generated pages and health-code screenshots of several sizes. The client shares the
machine's cores with the server; on a 2-core machine read the ratio, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from clients.health_code import HealthCodeClient
from clients.ocr import OcrClient
from perf.probes.output import emit
from samples.images import mixed_images


def rapidocr_rate(images: list[bytes]) -> dict:
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR()
    engine(images[0])  # warm-up
    start = time.perf_counter()
    for data in images:
        engine(data)
    elapsed = time.perf_counter() - start
    return {"images_per_s": round(len(images) / elapsed, 3), "seconds": round(elapsed, 2)}


def served_rate(client, images: list[bytes], concurrency: int) -> dict:
    client.read(images[0])  # warm-up

    def timed(data):
        start = time.perf_counter()
        client.read(data)
        return time.perf_counter() - start

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        latencies = np.array(list(pool.map(timed, images))) * 1000
    elapsed = time.perf_counter() - start
    return {
        "concurrency": concurrency,
        "images_per_s": round(len(images) / elapsed, 3),
        "seconds": round(elapsed, 2),
        "latency_ms": {f"p{p}": round(float(np.percentile(latencies, p))) for p in (50, 90, 99)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="localhost:8001")
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--model", choices=["ocr", "health_code"], default="ocr")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--images", type=int, default=48)
    parser.add_argument("--seed", type=int, default=900)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    images = mixed_images(args.images, args.seed)
    client_class = OcrClient if args.model == "ocr" else HealthCodeClient
    rows = []
    for concurrency in args.concurrency:
        client = client_class(args.url, args.protocol, concurrency)
        rows.append(served_rate(client, images, concurrency))
        client.close()
        print(json.dumps(rows[-1]))
    report = {"model": args.model, "images": len(images), "served": rows, "rapidocr_in_process": rapidocr_rate(images)}
    best = max(r["images_per_s"] for r in rows)
    report["best_served_over_rapidocr"] = round(best / report["rapidocr_in_process"]["images_per_s"], 3)
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
