"""Chunk token lengths of sample texts and the padding waste of RADAR's length buckets.

    python -m perf.probes.radar_buckets [--artifacts artifacts/radar] [--texts 400] [--bucket-count N] [--out FILE]

Compares the buckets the repository builder chooses (for the CPU profile's bucket count unless
--bucket-count says otherwise) with padding every chunk to the model's maximum, and with padding
each request to its own longest chunk.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from kit.pipelines.batching.buckets import padding_waste
from kit.pipelines.text.radar import chunk_text
from perf.probes.output import emit
from perf.workloads.radar import RADAR
from samples.texts import sample_texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts/radar"))
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--seed", type=int, default=101, help="a different seed from the one buckets are chosen on")
    parser.add_argument("--bucket-count", type=int, help="default: the CPU profile's")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    variant = {"radar": {"parameters": {"bucket_count": str(args.bucket_count)}}} if args.bucket_count else None
    with tempfile.TemporaryDirectory(prefix="radar-buckets-") as work:
        settings = RADAR.settings(args.artifacts, Path(work), variant)
    meta = json.loads((args.artifacts / "export.json").read_text())
    tokenizer = Tokenizer.from_file(str(args.artifacts / "tokenizer.json"))
    max_tokens = int(meta["max_tokens"])
    per_text = [
        [len(ids) for ids in chunk_text(tokenizer, text, settings.max_chars, max_tokens)[1]]
        for text in sample_texts(args.texts, 100, 800, seed=args.seed, multilingual=0.05)
    ]
    lengths = [n for text in per_text for n in text]
    per_request_max = sum(max(t) * len(t) for t in per_text)
    report = {
        "source": meta["source"],
        "texts": args.texts,
        "chunks": len(lengths),
        "token_length_percentiles": {p: int(np.percentile(lengths, p)) for p in (5, 25, 50, 75, 95, 99, 100)},
        "buckets": list(settings.buckets),
        "bucket_count": settings.bucket_count,
        "padding_waste": {
            "chosen_buckets": round(padding_waste(lengths, settings.buckets), 4),
            "pad_to_max_tokens": round(padding_waste(lengths, [max_tokens]), 4),
            "pad_to_longest_chunk_of_each_request": round(1 - sum(lengths) / per_request_max, 4),
        },
    }
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
