"""A user's pipeline of two networks in turn, as OCR's is: a text per row, split into words whose ids a pooling network
averages (tests.onnx_graphs.pooled_embeddings, pooler.onnx), the average then scored by a second network
(tests.onnx_graphs.mlp, scorer.onnx). The texts of a request are padded to its longest; an empty text is bad input."""

import zlib

import numpy as np

NETWORKS = {"pooler": "pooler.onnx", "scorer": "scorer.onnx"}
INPUTS = {"text": ("BYTES", [1])}
OUTPUTS = {"words": ("INT64", [1]), "probs": ("FP32", [4])}
VOCABULARY = 10  # the pooler's embedding rows


def word_ids(text: bytes) -> list[int]:
    try:
        words = text.decode("utf-8").split()
    except UnicodeDecodeError:
        raise ValueError("text is not UTF-8") from None
    if not words:
        raise ValueError("text has no words")
    return [zlib.crc32(word.lower().encode()) % VOCABULARY for word in words]


async def run(inputs, networks):
    ids = [word_ids(row[0]) for row in inputs["text"]]
    length = max(len(row) for row in ids)
    padded = np.array([row + [0] * (length - len(row)) for row in ids], dtype=np.int64)
    mask = np.array([[1.0] * len(row) + [0.0] * (length - len(row)) for row in ids], dtype=np.float32)
    pooled = await networks.pooler({"ids": padded, "mask": mask})
    count = pooled["count"]  # one value per row: [rows, 1], as a network's per-row values are
    features = np.concatenate([pooled["pooled"], count, np.ones((len(ids), 1), np.float32)], axis=1)
    scored = await networks.scorer({"features": features})
    return {"words": count.astype(np.int64), "probs": scored["probs"]}
