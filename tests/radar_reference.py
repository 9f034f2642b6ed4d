"""RADAR's direct reference for the served tests: the exported model in this process, no server."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def direct_scorer(artifacts: Path):
    """Direct ONNX Runtime inference of the export's FP32 model.onnx, one chunk at a time and unpadded:
    no bucketing, no batching."""
    meta = json.loads((artifacts / "export.json").read_text())
    tokenizer = Tokenizer.from_file(str(artifacts / "tokenizer.json"))
    session = ort.InferenceSession(str(artifacts / "model.onnx"), providers=["CPUExecutionProvider"])
    index = meta["ai_label_index"]

    def score(chunk: str) -> float:
        ids = np.array([tokenizer.encode(chunk).ids], dtype=np.int64)
        (logits,) = session.run(["logits"], {"input_ids": ids, "attention_mask": np.ones_like(ids)})
        exp = np.exp(logits[0] - logits[0].max())
        return float(exp[index] / exp.sum())

    score.tokenizer = tokenizer
    score.max_tokens = meta["max_tokens"]
    score.atol = meta["atol"]
    return score
