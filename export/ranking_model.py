"""Export a Hugging Face cross-encoder (a text-ranking spec's checkpoint: `AutoModelForSequenceClassification` with one
label, read over query-document pairs) to ONNX for Triton, validated against PyTorch.

The graph takes `input_ids`, `attention_mask` and, where the tokenizer makes them (a BERT's, not a DistilBERT's),
`token_type_ids` (the query's segment 0, the document's 1), and answers `logits` [batch, 1]; a pair's relevance is its
sigmoid (kit.pipelines.text.pairs). It is compared with PyTorch on padded batches of pairs of mixed lengths, one at
the full token limit, and refused above --atol. Writes into --out: model.onnx (and model.cpu.onnx, a link: the CPU
serves the graph as exported), the fast tokenizer's tokenizer.json, token_lengths.json (the token counts of the chunk
pairs of a fixed sample, as served, from which the build chooses the length buckets), checkpoint/ (the model and
tokenizer as exported, which the PyTorch runner serves with the same LogitsOnly) and export.json, last, only when every
check passed.

    python -m export.ranking_model --model DIR_OR_HUB_ID --out artifacts/models/NAME [--max-chars N]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForSequenceClassification

from export.text_checkpoint import ExportError, load_tokenizer
from export.text_export import Checkpoint, export_logits, parser, run, save_export
from export.text_model import DEFAULT_ATOL, DEFAULT_OPSET
from export.text_samples import SAMPLE_TEXTS
from kit.pipelines.text.pairs import pair_token_lengths
from kit.runners.torch_models import LogitsOnly
from samples.texts import sample_texts

TASK = "text-ranking"
TYPED_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
QUERIES = ["When does the committee meet?", "What do detectors learn from?", "bread", "Which results are state of the art?"]
BUCKET_SAMPLE = {"count": 120, "min_chars": 100, "max_chars": 1200, "seed": 5, "multilingual": 0.05}


def step(message: str) -> None:
    print(f"[export.ranking_model] {message}", file=sys.stderr, flush=True)


def load_cross_encoder(source: str) -> tuple[LogitsOnly, object, tuple[str, ...]]:
    """The model, its fast tokenizer and the graph's inputs; ExportError where it is not a one-label sequence
    classifier with a fast tokenizer that reads pairs."""
    try:
        model = AutoModelForSequenceClassification.from_pretrained(source, dtype=torch.float32).eval()
        tokenizer = load_tokenizer(source)
    except (OSError, ValueError, KeyError) as exc:
        raise ExportError(f"cannot load {source} as a cross-encoder: {exc}") from exc
    if model.config.num_labels != 1:
        raise ExportError(
            f"{source} has {model.config.num_labels} labels; a cross-encoder scores a pair by one logit (num_labels 1)"
        )
    model.config.use_cache = False
    typed = "token_type_ids" in tokenizer.model_input_names
    return LogitsOnly(model).eval(), tokenizer, TYPED_INPUTS if typed else TYPED_INPUTS[:2]


def pair_batches(tokenizer, limit: int, inputs: tuple[str, ...]) -> list[dict[str, np.ndarray]]:
    """Batches of 1 and 3 pairs padded to different lengths, and one pair cut at the full `limit` tokens."""
    long_document = " ".join(SAMPLE_TEXTS * 20)
    groups = [
        ([QUERIES[0]], [SAMPLE_TEXTS[0]]),
        (QUERIES[:3], SAMPLE_TEXTS[1:4]),
        (QUERIES[1:4], SAMPLE_TEXTS[4:7]),
        ([QUERIES[3]], [long_document]),
    ]
    batches = []
    for queries, documents in groups:
        encoded = tokenizer(queries, documents, padding=True, truncation="only_second", max_length=limit, return_tensors="np")
        batches.append({name: encoded[name].astype(np.int64) for name in inputs})
    return batches


def write_token_lengths(tokenizer_path: Path, limit: int, max_chars: int, path: Path) -> int:
    """Chunk pair token lengths of the bucket sample (each document with each query), as the pairs model plans them."""
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    documents = sample_texts(**BUCKET_SAMPLE)
    pairs = [(QUERIES[i % len(QUERIES)], document) for i, document in enumerate(documents)]
    lengths = pair_token_lengths(tokenizer, pairs, max_chars, limit)
    sample = {"pairs": "export.ranking_model.write_token_lengths", **BUCKET_SAMPLE}
    path.write_text(json.dumps({"max_chars": max_chars, "max_tokens": limit, "sample": sample, "lengths": lengths}) + "\n")
    return len(lengths)


def export(source: str, out: Path, atol: float = DEFAULT_ATOL, opset_version: int = DEFAULT_OPSET, max_chars: int = 0) -> dict:
    step(f"loading {source}")
    checkpoint = Checkpoint(source, TASK, *load_cross_encoder(source))
    batches = pair_batches(checkpoint.tokenizer, checkpoint.limit, checkpoint.inputs)
    graph, meta = export_logits(checkpoint, batches, ("batch_size", 1), out, atol, opset_version, step)
    chunks = write_token_lengths(out / "tokenizer.json", checkpoint.limit, max_chars, out / "token_lengths.json")
    step(f"measured the token lengths of {chunks} sample chunk pairs")
    return save_export(checkpoint, out, graph, meta | {"max_chars": max_chars})


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__)
    options.add_argument("--max-chars", type=int, default=0, help="document chunks of at most N characters (0: by tokens)")
    args = options.parse_args(argv)
    return run(
        args,
        lambda: export(args.model, args.out, args.atol, args.opset, args.max_chars),
        lambda meta: f"{TASK}, inputs {', '.join(meta['inputs'])}",
    )


if __name__ == "__main__":
    sys.exit(main())
