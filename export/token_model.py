"""Export a Hugging Face token classifier (a token-classification spec's checkpoint: `AutoModelForTokenClassification`,
named entities, PII) to ONNX for Triton, validated against PyTorch.

The graph takes `input_ids` and `attention_mask` and answers `logits` [batch, tokens, labels], one row of label
logits per token; kit.pipelines.text.entities turns them into entities as `transformers`' pipeline does. It is compared
with PyTorch on padded batches of mixed lengths, one at the full token limit, and refused above --atol. A long text is
read in windows of the model's limit that share --stride tokens (0: a quarter of the limit), which export.json records.
Writes into --out: model.onnx (and model.cpu.onnx, a link: the CPU serves the graph as exported), the fast tokenizer's
tokenizer.json, token_lengths.json (the token counts of a fixed sample's windows, as served, from which the build
chooses the length buckets), checkpoint/ (the model and tokenizer as exported, which the PyTorch runner serves with
the same LogitsOnly) and export.json, last, only when every check passed.

    python -m export.token_model --model DIR_OR_HUB_ID --out artifacts/models/NAME [--stride N]
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
from transformers import AutoConfig, AutoModelForTokenClassification

from export.onnx_validate import TensorSpec, ValidationError, check_signature
from export.text_checkpoint import ExportError, load_tokenizer, max_tokens, pad_token_id, write_tokenizer
from export.text_model import (
    CPU_GRAPH,
    DEFAULT_ATOL,
    DEFAULT_OPSET,
    export_onnx,
    link_cpu_graph,
    needs_external_data,
    save_export,
    validate,
)
from export.text_samples import BUCKET_SAMPLE, INPUT_NAMES, sample_batches, torch_logits
from kit.pipelines.text.entities import window_token_lengths
from kit.runners.torch_models import LogitsOnly
from samples.texts import sample_texts

TASK = "token-classification"
OUTPUT = "logits"


def step(message: str) -> None:
    print(f"[export.token_model] {message}", file=sys.stderr, flush=True)


def load_token_classifier(source: str) -> tuple[LogitsOnly, object]:
    """The model and its fast tokenizer; ExportError where the checkpoint is no token classifier (a sequence
    classifier's checkpoint would load with a new, untrained head) or has no fast tokenizer."""
    try:
        config = AutoConfig.from_pretrained(source)
        architectures = config.architectures or []
        if not any(name.endswith("ForTokenClassification") for name in architectures):
            named = ", ".join(architectures) or "no architecture named"
            raise ExportError(f"{source} is a {config.model_type} checkpoint ({named}), not a token classifier")
        model = AutoModelForTokenClassification.from_pretrained(source, dtype=torch.float32).eval()
        tokenizer = load_tokenizer(source)
    except (OSError, ValueError, KeyError) as exc:
        raise ExportError(f"cannot load {source} as a token classifier: {exc}") from exc
    model.config.use_cache = False
    return LogitsOnly(model).eval(), tokenizer


def window_stride(stride: int, limit: int, specials: int) -> int:
    """The tokens two windows share: `stride`, or a quarter of the limit for 0; ExportError where no window could
    move on (a stride of the window's own length)."""
    chosen = stride or limit // 4
    if not 0 < chosen < limit - specials:
        raise ExportError(f"--stride {chosen}: windows of {limit} tokens ({specials} special) share 1 to {limit - specials - 1}")
    return chosen


def write_token_lengths(tokenizer_path: Path, limit: int, stride: int, path: Path) -> int:
    """The token count of every window of the bucket sample, as served; returns the window count."""
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    lengths = window_token_lengths(tokenizer, sample_texts(**BUCKET_SAMPLE), limit, stride)
    sample = {"texts": "samples.texts.sample_texts", **BUCKET_SAMPLE}
    path.write_text(json.dumps({"max_chars": 0, "max_tokens": limit, "sample": sample, "lengths": lengths}) + "\n")
    return len(lengths)


def export(source: str, out: Path, atol: float = DEFAULT_ATOL, opset_version: int = DEFAULT_OPSET, stride: int = 0) -> dict:
    step(f"loading {source}")
    module, tokenizer = load_token_classifier(source)
    config = module.model.config
    limit = max_tokens(config, tokenizer)
    pad = pad_token_id(tokenizer)
    processor = tokenizer.backend_tokenizer.post_processor
    stride = window_stride(stride, limit, processor.num_special_tokens_to_add(False) if processor else 0)
    out.mkdir(parents=True, exist_ok=True)
    (out / "export.json").unlink(missing_ok=True)
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    batches = sample_batches(tokenizer, limit)
    try:
        expected = [torch_logits(module, batch) for batch in batches]
    except (IndexError, RuntimeError, ValueError) as exc:
        raise ExportError(f"PyTorch cannot run {source} on the sample inputs ({type(exc).__name__}: {exc})") from exc
    path = out / "model.onnx"
    external = needs_external_data(module.model)
    step(f"exporting to {path} ({config.num_labels} labels per token; opset {opset_version}, external data: {external})")
    export_onnx(module, batches[1], path, opset_version, external, OUTPUT)
    axes = ("batch_size", "sequence_length")
    inputs = [TensorSpec(name, np.dtype(np.int64), axes) for name in INPUT_NAMES]
    check_signature(path, inputs, [TensorSpec(OUTPUT, np.dtype(np.float32), (*axes, config.num_labels))])
    step(f"validating ONNX Runtime against PyTorch (atol {atol:g})")
    max_abs_diff = validate(path, batches, expected, atol, OUTPUT)
    link_cpu_graph(out, path.name)
    write_tokenizer(tokenizer, out / "tokenizer.json")
    windows = write_token_lengths(out / "tokenizer.json", limit, stride, out / "token_lengths.json")
    step(f"measured the token lengths of {windows} sample windows ({stride} tokens shared)")
    meta = {
        "source": source,
        "task": TASK,
        "model_type": config.model_type,
        "num_labels": config.num_labels,
        "id2label": {str(index): label for index, label in config.id2label.items()},
        "max_tokens": limit,
        "stride": stride,
        "pad_token_id": pad,
        "unk_token_id": tokenizer.unk_token_id,
        "inputs": list(INPUT_NAMES),
        "outputs": [OUTPUT],
        "atol": atol,
        "max_abs_diff": max_abs_diff,
    }
    return save_export(out, path, module, tokenizer, meta)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="hub id or local checkpoint directory")
    parser.add_argument("--out", type=Path, required=True, help=f"directory for model.onnx, {CPU_GRAPH}, tokenizer.json, ...")
    parser.add_argument("--atol", type=float, default=DEFAULT_ATOL, help="max abs logit difference allowed")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    parser.add_argument(
        "--stride", type=int, default=0, help="tokens two windows of a long text share (0: a quarter of the limit)"
    )
    args = parser.parse_args(argv)
    try:
        meta = export(args.model, args.out, args.atol, args.opset, args.stride)
    except (ExportError, ValidationError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    print(
        f"exported {args.model} (token-classification, {meta['num_labels']} labels) to {args.out / 'model.onnx'}: max abs "
        f"diff {meta['max_abs_diff']:.3g} <= atol {args.atol:g}, max_tokens {meta['max_tokens']}, stride {meta['stride']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
