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

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForSequenceClassification

from export.onnx_validate import ValidationError, check_signature
from export.text_checkpoint import ExportError, load_tokenizer, max_tokens, pad_token_id, write_tokenizer
from export.text_model import (
    CPU_GRAPH,
    DEFAULT_ATOL,
    DEFAULT_OPSET,
    expected_signature,
    export_onnx,
    link_cpu_graph,
    needs_external_data,
    save_export,
    validate,
)
from export.text_samples import SAMPLE_TEXTS
from kit.pipelines.text.pairs import pair_token_lengths
from kit.runners.torch_models import LogitsOnly
from samples.texts import sample_texts

TASK = "text-ranking"
OUTPUT = "logits"
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


def torch_logits(module: LogitsOnly, batch: dict[str, np.ndarray]) -> np.ndarray:
    with torch.no_grad():
        return module(**{name: torch.from_numpy(value) for name, value in batch.items()}).numpy()


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
    module, tokenizer, inputs = load_cross_encoder(source)
    limit = max_tokens(module.model.config, tokenizer)
    pad = pad_token_id(tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    (out / "export.json").unlink(missing_ok=True)
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    batches = pair_batches(tokenizer, limit, inputs)
    try:
        expected = [torch_logits(module, batch) for batch in batches]
    except (IndexError, RuntimeError, ValueError) as exc:
        raise ExportError(f"PyTorch cannot run {source} on sample pairs ({type(exc).__name__}: {exc})") from exc
    path = out / "model.onnx"
    external = needs_external_data(module.model)
    step(f"exporting to {path} (inputs {', '.join(inputs)}; opset {opset_version}, external data: {external})")
    export_onnx(module, batches[1], path, opset_version, external, OUTPUT, inputs)
    check_signature(path, *expected_signature(1, OUTPUT, inputs))
    step(f"validating ONNX Runtime against PyTorch on pairs (atol {atol:g})")
    max_abs_diff = validate(path, batches, expected, atol, OUTPUT)
    link_cpu_graph(out, path.name)
    write_tokenizer(tokenizer, out / "tokenizer.json")
    chunks = write_token_lengths(out / "tokenizer.json", limit, max_chars, out / "token_lengths.json")
    step(f"measured the token lengths of {chunks} sample chunk pairs")
    meta = {
        "source": source,
        "task": TASK,
        "model_type": module.model.config.model_type,
        "num_labels": 1,
        "max_tokens": limit,
        "pad_token_id": pad,
        "inputs": list(inputs),
        "outputs": [OUTPUT],
        "atol": atol,
        "max_abs_diff": max_abs_diff,
        "max_chars": max_chars,
    }
    return save_export(out, path, module, tokenizer, meta)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="hub id or local checkpoint directory")
    parser.add_argument("--out", type=Path, required=True, help=f"directory for model.onnx, {CPU_GRAPH}, tokenizer.json, ...")
    parser.add_argument("--atol", type=float, default=DEFAULT_ATOL, help="max abs logit difference allowed")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    parser.add_argument("--max-chars", type=int, default=0, help="document chunks of at most N characters (0: by tokens)")
    args = parser.parse_args(argv)
    try:
        meta = export(args.model, args.out, args.atol, args.opset, args.max_chars)
    except (ExportError, ValidationError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    print(
        f"exported {args.model} (text-ranking, inputs {', '.join(meta['inputs'])}) to {args.out / 'model.onnx'}: max abs diff "
        f"{meta['max_abs_diff']:.3g} <= atol {args.atol:g}, max_tokens {meta['max_tokens']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
