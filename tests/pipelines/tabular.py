"""A user's pipeline, as a test brings it with `kit add --task pipeline` (docs/MODELS.md): rows of 8 values and a
scale each, scaled and scored by one network, answered as the best label's name, its probability and every label's.
Its network is tests.onnx_graphs.mlp, written beside it as scorer.onnx."""

import numpy as np

NETWORKS = {"scorer": "scorer.onnx"}
INPUTS = {"values": ("FP32", [8]), "scale": ("FP32", [1])}
OUTPUTS = {"label": ("BYTES", [1]), "top": ("FP32", [1]), "probs": ("FP32", [4])}
LABELS = np.array([b"low", b"mid", b"high", b"top"], dtype=object)


async def run(inputs, networks):
    values, scale = inputs["values"], inputs["scale"]
    if not np.all(scale > 0):
        raise ValueError("scale must be positive")
    scored = await networks.scorer({"features": values / scale})
    probs = scored["probs"]
    return {"label": LABELS[probs.argmax(axis=1)][:, None], "top": probs.max(axis=1, keepdims=True), "probs": probs}


# Valid rows for `kit add`'s check: random ones would hold scales of zero or below.
EXAMPLE = {"values": [[0.5] * 8, list(range(8)), [-1.0] * 8], "scale": [[1.0], [2.0], [0.5]]}
