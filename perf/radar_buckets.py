"""Chunk token lengths of sample texts and the padding waste of RADAR's length buckets.

    python -m perf.radar_buckets [--artifacts artifacts/radar] [--texts 400] [--bucket-count N] [--out perf/results/radar_buckets.json]

Compares the buckets the repository builder chooses (for the CPU profile's bucket count unless
--bucket-count says otherwise) with padding every chunk to the model's maximum, and with padding
each request to its own longest chunk.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from kit.batching.buckets import padding_waste
from kit.text.corpus import sample_texts
from kit.text.radar import bucket_parameters, chunk_text
from perf.output import emit
from perf.targets import radar_bucket_count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts", type=Path, default=Path("artifacts/radar"))
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--seed", type=int, default=101, help="a different seed from the one buckets are chosen on")
    parser.add_argument("--bucket-count", type=int, default=radar_bucket_count(), help="default: the CPU profile's")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    meta = json.loads((args.artifacts / "export.json").read_text())
    tokenizer = Tokenizer.from_file(str(args.artifacts / "tokenizer.json"))
    max_tokens = int(meta["max_tokens"])
    buckets = [int(b) for b in bucket_parameters(args.artifacts, count=args.bucket_count)["buckets"].split(",")]
    per_text = [
        [len(ids) for ids in chunk_text(tokenizer, text, 300, max_tokens)[1]]
        for text in sample_texts(args.texts, 100, 800, seed=args.seed, multilingual=0.05)
    ]
    lengths = [n for text in per_text for n in text]
    per_request_max = sum(max(t) * len(t) for t in per_text)
    report = {
        "source": meta["source"],
        "texts": args.texts,
        "chunks": len(lengths),
        "token_length_percentiles": {p: int(np.percentile(lengths, p)) for p in (5, 25, 50, 75, 95, 99, 100)},
        "buckets": buckets,
        "bucket_count": args.bucket_count,
        "padding_waste": {
            "chosen_buckets": round(padding_waste(lengths, buckets), 4),
            "pad_to_max_tokens": round(padding_waste(lengths, [max_tokens]), 4),
            "pad_to_longest_chunk_of_each_request": round(1 - sum(lengths) / per_request_max, 4),
        },
    }
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
