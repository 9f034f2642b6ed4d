"""What padding costs RADAR on this machine: the limit's one session at several bucket counts.

    python -m perf.probes.radar_padding --model artifacts/radar-large --bucket-counts 3 5 8 --batch-sizes 1 8

The same texts as `make perf` (100-800 characters, seed 42), every chunk padded to the buckets the
repository builder chooses for each count; per count, the padded and real tokens and the chunks/s
of one session with all cores at each batch size (perf.workloads.radar_limit). The CPU profile's
`bucket_count` rests on this: on a CPU, where batching buys little, fewer padded tokens are the
larger lever.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from kit.adapters.artifacts import radar_pipeline
from perf.engine.limit import CORES
from perf.probes.output import emit
from perf.workloads.radar import RADAR
from perf.workloads.radar_limit import chunk_rows, one_session
from samples.texts import sample_texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=Path("artifacts/radar-large"), help="an export.radar folder")
    parser.add_argument("--bucket-counts", type=int, nargs="+", default=[3, 5, 8])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    texts = sample_texts(args.texts, 100, 800, seed=args.seed)
    rows = []
    for count in args.bucket_counts:
        with tempfile.TemporaryDirectory(prefix="radar-padding-") as work:
            settings = RADAR.settings(args.model, Path(work), {"radar": {"parameters": {"bucket_count": str(count)}}})
        chunks = chunk_rows(radar_pipeline(args.model, settings), texts)
        padded, real = sum(len(ids) for ids, _ in chunks), sum(int(mask.sum()) for _, mask in chunks)
        for batch in args.batch_sizes:
            rate, per_cpu = one_session(args.model / "model.onnx", chunks, CORES, batch)
            rows.append(
                {
                    "bucket_count": count,
                    "batch": batch,
                    "chunks": len(chunks),
                    "padded_tokens": padded,
                    "real_tokens": real,
                    "chunks_per_s": round(rate, 3),
                    "chunks_per_cpu_s": round(per_cpu, 3),
                }
            )
    emit({"model": str(args.model), "texts": args.texts, "seed": args.seed, "threads": CORES, "rows": rows}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
