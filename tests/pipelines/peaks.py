"""A user's unbatched pipeline with settings, as OCR's is: one request is a whole signal of any length, its answer the
peaks above a threshold (as many as there are: an answer whose size is its own), each scored by a network
(tests.onnx_graphs.mlp, scorer.onnx) on a window around it. The threshold comes from the spec's `parameters`, and
the window's weights from a file beside the module, read once at load. A signal with a NaN is bad input."""

from dataclasses import dataclass

import numpy as np

NETWORKS = {"scorer": "scorer.onnx"}
INPUTS = {"signal": ("FP32", [-1])}
OUTPUTS = {"positions": ("INT64", [-1]), "scores": ("FP32", [-1, 4])}
EXAMPLE = {"signal": [[0.0, 3.0, 0.0, 1.0, 5.0, 0.0, 0.0, 2.5], [9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]}
WEIGHTS = "weights.txt"  # eight numbers, one a line
FILES = [WEIGHTS]  # linked into the entry's folder, where `load` reads it


@dataclass(frozen=True)
class PeakSettings:
    threshold: float
    window: int = 3


SETTINGS = PeakSettings


def load(settings, folder):
    weights = np.array((folder / WEIGHTS).read_text().split(), dtype=np.float32)

    async def run(inputs, networks):
        signal = inputs["signal"]
        if np.isnan(signal).any():
            raise ValueError("signal holds NaN")
        positions = np.flatnonzero(signal > settings.threshold)
        padded = np.pad(signal, settings.window)
        windows = np.stack([padded[p : p + 2 * settings.window + 1] for p in positions]) if len(positions) else None
        if windows is None:
            return {"positions": positions.astype(np.int64), "scores": np.zeros((0, 4), np.float32)}
        features = np.resize(windows, (len(positions), 8)) * weights
        scored = await networks.scorer({"features": features.astype(np.float32)})
        return {"positions": positions.astype(np.int64), "scores": scored["probs"]}

    return run
