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

import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import AutoConfig, AutoModelForTokenClassification

from export.text_checkpoint import ExportError, load_tokenizer
from export.text_export import AXES, Checkpoint, export_logits, parser, run, save_export
from export.text_model import DEFAULT_ATOL, DEFAULT_OPSET
from export.text_samples import BUCKET_SAMPLE, INPUT_NAMES, sample_batches
from kit.pipelines.text.entities import window_token_lengths
from kit.runners.torch_models import LogitsOnly
from samples.texts import sample_texts

TASK = "token-classification"


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
    checkpoint = Checkpoint(source, TASK, module, tokenizer, INPUT_NAMES)
    limit, config = checkpoint.limit, checkpoint.config
    processor = tokenizer.backend_tokenizer.post_processor
    stride = window_stride(stride, limit, processor.num_special_tokens_to_add(False) if processor else 0)
    batches = sample_batches(tokenizer, limit)
    graph, meta = export_logits(checkpoint, batches, (*AXES, config.num_labels), out, atol, opset_version, step)
    windows = write_token_lengths(out / "tokenizer.json", limit, stride, out / "token_lengths.json")
    step(f"measured the token lengths of {windows} sample windows ({stride} tokens shared)")
    own = {
        "id2label": {str(index): label for index, label in config.id2label.items()},
        "stride": stride,
        "unk_token_id": tokenizer.unk_token_id,
    }
    return save_export(checkpoint, out, graph, meta | own)


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__)
    options.add_argument(
        "--stride", type=int, default=0, help="tokens two windows of a long text share (0: a quarter of the limit)"
    )
    args = options.parse_args(argv)
    return run(
        args,
        lambda: export(args.model, args.out, args.atol, args.opset, args.stride),
        lambda meta: f"{TASK}, {meta['num_labels']} labels, stride {meta['stride']}",
    )


if __name__ == "__main__":
    sys.exit(main())
