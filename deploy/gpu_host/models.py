"""The models of a GPU run, generated where they are served (weights cannot be carried, and a 1.4 GB ONNX export
would cost minutes of the host's time): folders laid out as the exports lay them out, for the gpu-embedded
profile's PyTorch runner, which needs no ONNX file.

- `radar/`: the RoBERTa-large-shaped stand-in (export.standins, roberta-large's vocabulary size as
  export.gpu_levers builds it) in `checkpoint/`, with the files the `radar` entry model reads
  (tokenizer.json, token_lengths.json, export.json) as export.text_model writes them;
- `resnet50/`: the ResNet-50 stand-in (export.resnet) in `checkpoint/`, and `cost.json`, the `cost` merge
  policy's cost model measured on this device through the PyTorch runner (export.resnet_cost).

    python -m deploy.gpu_host.models --out build/gpu/models --device cuda --models radar   # deploy/gpu_host/run.sh
    python -m deploy.gpu_host.models --out build/gpu/models --device cpu --tiny           # its CPU rehearsal, both
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import transformers

from export.gpu_levers import RADAR_VOCAB
from export.resnet import CHECKPOINT
from export.resnet import make_standin as make_resnet_standin
from export.resnet_cost import BATCHES, SIDES, measure, write_cost
from export.standins import build_model, corpus, make_config, train_tokenizer, wrap_tokenizer
from export.text_checkpoint import max_tokens, pad_token_id, write_tokenizer
from export.text_samples import write_token_lengths
from kit.pipelines.text.pipeline import DEFAULT_MAX_CHARS
from kit.runners.torch import TorchModel, TorchOptions

SEED = 0
MODELS = ("radar", "resnet50")
SIZES = {False: ("large", "resnet50"), True: ("tiny", "tiny")}
# The batch sizes the cost model is fitted on: the GPU batches up to the gpu-embedded profile's preferred sizes.
COST_BATCHES = {"cuda": (1, 8, 32), "cpu": BATCHES}


def step(message: str) -> None:
    print(f"[gpu_host.models] {message}", flush=True)


def radar(folder: Path, size: str) -> int:
    """RADAR's files as export.text_model writes them, minus the ONNX graphs; returns the parameter count."""
    tokenizer = wrap_tokenizer(train_tokenizer(corpus()))
    model = build_model(make_config(size, RADAR_VOCAB), SEED)
    model.save_pretrained(folder / CHECKPOINT)
    tokenizer.save_pretrained(folder / CHECKPOINT)
    write_tokenizer(tokenizer, folder / "tokenizer.json")
    limit = max_tokens(model.config, tokenizer)
    write_token_lengths(folder / "tokenizer.json", limit, DEFAULT_MAX_CHARS, folder / "token_lengths.json")
    meta = {
        "source": f"export.standins {size} shape, vocabulary {RADAR_VOCAB}, seed {SEED} (random weights; no ONNX)",
        "model_type": model.config.model_type,
        "num_labels": model.config.num_labels,
        "ai_label_index": 0,
        "max_tokens": limit,
        "pad_token_id": pad_token_id(tokenizer),
        "checkpoint": CHECKPOINT,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    (folder / "export.json").write_text(json.dumps(meta, indent=2) + "\n")
    return sum(p.numel() for p in model.parameters())


def resnet(folder: Path, size: str, options: TorchOptions, repeat: int) -> int:
    """The stand-in's checkpoint and its cost model on `options`' device; returns the parameter count."""
    model = make_resnet_standin(size, SEED)
    model.save_pretrained(folder / CHECKPOINT)
    runner = TorchModel.from_checkpoint(folder / CHECKPOINT, ["probs"], options)
    samples = measure(runner, SIDES, COST_BATCHES[options.device], repeat)
    write_cost(samples, folder / "cost.json", device=options.device, dtype=options.dtype)
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the model folders: radar/ and resnet50/")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where ResNet's cost model is measured")
    parser.add_argument("--tiny", action="store_true", help="the tiny stand-ins (the CPU rehearsal)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=MODELS, help="the models to make (default: both)")
    args = parser.parse_args(argv)
    radar_size, resnet_size = SIZES[args.tiny]
    options = TorchOptions("fp16" if args.device == "cuda" else "fp32", args.device)
    makers = {
        "radar": lambda folder: radar(folder, radar_size),
        "resnet50": lambda folder: resnet(folder, resnet_size, options, repeat=2 if args.tiny else 5),
    }
    for name in args.models:
        started = time.perf_counter()
        (args.out / name).mkdir(parents=True, exist_ok=True)
        parameters = makers[name](args.out / name)
        step(f"{name}: {parameters / 1e6:.1f} M parameters in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
