"""Measure a padded-image model's run time per (batch, image size) and fit the merge CostModel.

    python -m export.resnet_cost --model artifacts/resnet50/model.onnx --out artifacts/resnet50/cost.json

Runs the ONNX model (inputs `pixel_values` [batch, 3, h, w], `image_sizes` [batch, 2]) in ONNX
Runtime with the session settings of the kit's runner and the backbone's thread count from the CPU
profile, on square images of a few sides at a few batch sizes (median of `--repeat` runs after one
warm-up), and writes the samples and the fitted model. The served path adds a fixed cost per
backbone call on top (BLS and the Python backend), which this leaves out: merging saves it too, so
the cost policy errs on the side of not merging. `measure` takes any runner of those tensors: a GPU
host measures the PyTorch runner on its device the same way (deploy.gpu_host.models).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.pipelines.batching.merge import CostModel
from kit.runners.onnx import make_session

SIDES = (64, 128, 176, 224, 288)
BATCHES = (1, 4)
Run = Callable[[dict[str, np.ndarray]], object]


def measure(run: Run, sides=SIDES, batches=BATCHES, repeat: int = 3) -> list[tuple[int, int, float]]:
    """(batch, values per image, median seconds) of `run` on square images of each side at each batch size."""
    rng = np.random.default_rng(0)
    samples = []
    for side in sides:
        for batch in batches:
            feed = {
                "pixel_values": rng.standard_normal((batch, 3, side, side), dtype=np.float32),
                "image_sizes": np.full((batch, 2), side, dtype=np.int64),
            }
            run(feed)
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                run(feed)
                times.append(time.perf_counter() - start)
            samples.append((batch, 3 * side * side, statistics.median(times)))
            print(f"  {batch} x {side}x{side}: {1000 * samples[-1][2]:.1f} ms", file=sys.stderr, flush=True)
    return samples


def write_cost(samples: list[tuple[int, int, float]], out: Path, **facts) -> CostModel:
    """Fit the cost model and write it with its samples (and what it was measured on) as the merge policy reads it."""
    model = CostModel.fit(samples)
    out.write_text(json.dumps({"model": model.to_json(), **facts, "samples": samples}, indent=2) + "\n")
    return model


def measure_cost(model: Path, out: Path, threads: int = 1, repeat: int = 3) -> CostModel:
    """The cost model of the ONNX graph `model`, measured with `threads` intra-op threads (the CPU profile's for the backbone: 1),
    written to `out`."""
    session = make_session(model, threads)
    cost = write_cost(measure(lambda feed: session.run(None, feed), repeat=repeat), out, threads=threads)
    print(
        f"wrote {out}: fixed ms {[round(1000 * f, 2) for f in cost.fixed]}, "
        f"per item ms {[round(1000 * p, 2) for p in cost.per_item]} at {threads} thread(s)",
        flush=True,
    )
    return cost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="the padded-image ONNX model")
    parser.add_argument("--out", type=Path, required=True, help="cost.json to write")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads: the CPU profile's pixels-backbone role's (1)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    measure_cost(args.model, args.out, args.threads, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
