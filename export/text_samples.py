"""What a text export measures and checks on, beside the graph's own validation (export.text_model): the sample
batches of mixed lengths, the token lengths of a fixed sample's chunks as served (from which the build chooses the
length buckets), the INT8 gate's texts and the served-numerics canary's golden set, each through the module as
PyTorch runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from export.onnx_validate import Batch
from kit.pipelines.text.aggregate import ai_probability
from kit.pipelines.text.pipeline import DEFAULT_MAX_CHARS, chunk_token_lengths
from kit.runners.torch_models import TokenModel
from samples.texts import MULTILINGUAL, sample_texts

INPUT_NAMES = ("input_ids", "attention_mask")
# The texts buckets are chosen for: the field report's lengths with a multilingual tail.
BUCKET_SAMPLE = {"count": 400, "min_chars": 100, "max_chars": 800, "seed": 1, "multilingual": 0.05}
# The INT8 gate's texts: one chunk each, a third of them Chinese, Korean and emoji-heavy.
GATE_SAMPLE = {"count": 48, "min_chars": 40, "max_chars": DEFAULT_MAX_CHARS, "seed": 3, "multilingual": 0.3}
GATE_BATCH = 8
# The canary's tolerance on a probability for graphs that passed --atol: far above what padding to a
# length bucket moves (about 1e-6), far below what a wrong graph or precision moves.
CANARY_TOLERANCE = 1e-3
SAMPLE_TEXTS = [
    "The committee will meet on Thursday to review the budget.",
    "Large language models can produce fluent paragraphs on almost any topic, which makes it hard "
    "for readers to tell whether a person or a machine wrote a given text.",
    "Short one.",
    "Detectors are trained adversarially: a paraphraser tries to evade the detector while the "
    "detector learns from the paraphrases. Mixed scripts test the byte-level tokenizer: café, "
    "naïve, 人工智能, 한국어, 🤖✨.",
    "I walked to the market this morning and bought bread, cheese and a few apples.",
    "OK",
    "In conclusion, the results demonstrate that the proposed method achieves state-of-the-art "
    "performance across all benchmarks while remaining computationally efficient.",
]


def encode(tokenizer, texts: list[str], limit: int) -> Batch:
    """One batch, padded to its longest text, truncated at `limit` tokens."""
    encoded = tokenizer(texts, padding=True, truncation=True, max_length=limit, return_tensors="np")
    return {name: encoded[name].astype(np.int64) for name in INPUT_NAMES}


def sample_batches(tokenizer, limit: int) -> list[Batch]:
    """Batch sizes 1 and 3, padded to different lengths, and one input of the full `limit` tokens."""
    groups = [SAMPLE_TEXTS[:1], SAMPLE_TEXTS[1:4], SAMPLE_TEXTS[4:7], [" ".join(SAMPLE_TEXTS * 20)]]
    return [encode(tokenizer, texts, limit) for texts in groups]


def padded_batches(tokenizer, texts: list[str], limit: int, size: int) -> list[Batch]:
    return [encode(tokenizer, texts[start : start + size], limit) for start in range(0, len(texts), size)]


def gate_texts(max_chars: int) -> list[str]:
    """Shortest first, so that batches of neighbours waste little padding (RoBERTa-large on 2 cores)."""
    return sorted((text[:max_chars] for text in sample_texts(**GATE_SAMPLE)), key=len)


def canary_texts(max_chars: int) -> list[str]:
    """Short texts in English, mixed scripts, Chinese, Korean and emoji: each one chunk as served."""
    texts = [SAMPLE_TEXTS[0], SAMPLE_TEXTS[1], SAMPLE_TEXTS[3], SAMPLE_TEXTS[6], *MULTILINGUAL]
    return [text for text in texts if not max_chars or len(text) <= max_chars]


def torch_logits(model: TokenModel, batch: Batch) -> np.ndarray:
    """The module's output on a batch: a classifier's logits, or an encoder's embeddings."""
    with torch.no_grad():
        return model(*(torch.from_numpy(batch[name]) for name in INPUT_NAMES)).numpy()


def torch_probabilities(model: TokenModel, batches: list[Batch], ai_label_index: int) -> np.ndarray:
    return np.concatenate([ai_probability(torch_logits(model, batch), ai_label_index) for batch in batches])


def canary(model: TokenModel, tokenizer, limit: int, max_chars: int, ai_label_index: int, tolerance: float) -> dict:
    """The served-numerics canary: each text alone (no padding) through the source model."""
    texts = canary_texts(max_chars)
    scores = torch_probabilities(model, padded_batches(tokenizer, texts, limit, 1), ai_label_index)
    return {
        "texts": texts,
        "scores": [round(float(score), 7) for score in scores],
        "tolerance": tolerance,
        "reference": "PyTorch fp32 (source model)",
    }


def write_token_lengths(tokenizer_path: Path, max_tokens: int, max_chars: int, path: Path) -> int:
    """Chunk token lengths of the bucket sample, with the tokenizer serving loads; returns the chunk count."""
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    lengths = chunk_token_lengths(tokenizer, sample_texts(**BUCKET_SAMPLE), max_chars, max_tokens)
    sample = {"texts": "samples.texts.sample_texts", **BUCKET_SAMPLE}
    path.write_text(json.dumps({"max_chars": max_chars, "max_tokens": max_tokens, "sample": sample, "lengths": lengths}) + "\n")
    return len(lengths)
