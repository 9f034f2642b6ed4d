"""The export path a cross-encoder (export.ranking_model) and a token classifier (export.token_model) share; each keeps
what is its own: loading its checkpoint, its sample batches, its graph's output shape, the token lengths it measures,
its export.json fields and its CLI options.

`export_logits` runs PyTorch on the sample batches, exports the graph (`logits` out), checks its signature, holds ONNX
Runtime to PyTorch within --atol, links the graph as the CPU's and writes the fast tokenizer's tokenizer.json; the
exporter then measures its token lengths, and `save_export` writes checkpoint/ (the model and tokenizer as exported,
which the PyTorch runner serves with the same LogitsOnly) and export.json, last, only when every check passed.
`parser` and `run` are the two CLIs' common options (--model, --out, --atol, --opset), their one-line error and their
summary."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import onnxscript
import torch
import transformers

from export.onnx_validate import Batch, TensorSpec, ValidationError, check_signature, opset, provenance, sha256
from export.text_checkpoint import ExportError, max_tokens, pad_token_id, write_tokenizer
from export.text_model import (
    CHECKPOINT,
    CPU_GRAPH,
    DEFAULT_ATOL,
    DEFAULT_OPSET,
    export_onnx,
    link_cpu_graph,
    needs_external_data,
    validate,
)
from kit.runners.torch_models import LogitsOnly

OUTPUT = "logits"
AXES = ("batch_size", "sequence_length")


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint as its exporter loaded it: the module that answers `logits`, its fast tokenizer and the graph's
    inputs (a cross-encoder's token types where its tokenizer makes them)."""

    source: str
    task: str
    module: LogitsOnly
    tokenizer: object
    inputs: tuple[str, ...]

    @property
    def config(self):
        return self.module.model.config

    @property
    def limit(self) -> int:
        return max_tokens(self.config, self.tokenizer)


def torch_logits(module: LogitsOnly, batch: Batch) -> np.ndarray:
    """The module's logits on a batch, its inputs passed by name."""
    with torch.no_grad():
        return module(**{name: torch.from_numpy(value) for name, value in batch.items()}).numpy()


def export_logits(
    checkpoint: Checkpoint,
    batches: list[Batch],
    output_axes: tuple,
    out: Path,
    atol: float,
    opset_version: int,
    step: Callable[[str], None],
) -> tuple[Path, dict]:
    """The graph, exported into `out` from the module and validated on `batches` (`logits` of `output_axes`), and what
    export.json records of every such export; out's export.json and checkpoint/ of an earlier export are gone first."""
    pad = pad_token_id(checkpoint.tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    (out / "export.json").unlink(missing_ok=True)
    shutil.rmtree(out / CHECKPOINT, ignore_errors=True)
    try:
        expected = [torch_logits(checkpoint.module, batch) for batch in batches]
    except (IndexError, RuntimeError, ValueError) as exc:
        raise ExportError(f"PyTorch cannot run {checkpoint.source} on the sample inputs ({type(exc).__name__}: {exc})") from exc
    path = out / "model.onnx"
    external = needs_external_data(checkpoint.module.model)
    step(f"exporting to {path} (inputs {', '.join(checkpoint.inputs)}; opset {opset_version}, external data: {external})")
    export_onnx(checkpoint.module, batches[1], path, opset_version, external, OUTPUT, checkpoint.inputs)
    inputs = [TensorSpec(name, np.dtype(np.int64), AXES) for name in checkpoint.inputs]
    check_signature(path, inputs, [TensorSpec(OUTPUT, np.dtype(np.float32), output_axes)])
    step(f"validating ONNX Runtime against PyTorch (atol {atol:g})")
    max_abs_diff = validate(path, batches, expected, atol, OUTPUT)
    link_cpu_graph(out, path.name)
    write_tokenizer(checkpoint.tokenizer, out / "tokenizer.json")
    meta = {
        "source": checkpoint.source,
        "task": checkpoint.task,
        "model_type": checkpoint.config.model_type,
        "num_labels": checkpoint.config.num_labels,
        "max_tokens": checkpoint.limit,
        "pad_token_id": pad,
        "inputs": list(checkpoint.inputs),
        "outputs": [OUTPUT],
        "atol": atol,
        "max_abs_diff": max_abs_diff,
    }
    return path, meta


def save_export(checkpoint: Checkpoint, out: Path, graph: Path, meta: dict) -> dict:
    """The export finished: the model and tokenizer as exported (checkpoint/), then export.json, last, of `meta` and
    what every such export records beside it (the graph's opset and hash, the CPU graph, the libraries' versions)."""
    checkpoint.module.model.save_pretrained(out / CHECKPOINT)
    checkpoint.tokenizer.save_pretrained(out / CHECKPOINT)
    meta = meta | {
        "opset": opset(graph),
        "onnx_sha256": sha256(graph),
        "cpu_graph": graph.name,
        "checkpoint": CHECKPOINT,
        **provenance(torch, transformers, onnx, onnxruntime, onnxscript),
    }
    (out / "export.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def parser(doc: str) -> argparse.ArgumentParser:
    """The options both exporters take; each adds its own."""
    options = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_argument("--model", required=True, help="hub id or local checkpoint directory")
    options.add_argument("--out", type=Path, required=True, help=f"directory for model.onnx, {CPU_GRAPH}, tokenizer.json, ...")
    options.add_argument("--atol", type=float, default=DEFAULT_ATOL, help="max abs logit difference allowed")
    options.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    return options


def run(args: argparse.Namespace, export: Callable[[], dict], what: Callable[[dict], str]) -> int:
    """`export()`, then a line that says what it exported (`what` of its export.json); a refusal as one line (a caller,
    such as `kit add`, reports the last) and exit status 1."""
    try:
        meta = export()
    except (ExportError, ValidationError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    print(
        f"exported {args.model} ({what(meta)}) to {args.out / 'model.onnx'}: max abs diff {meta['max_abs_diff']:.3g} "
        f"<= atol {args.atol:g}, max_tokens {meta['max_tokens']}"
    )
    return 0
