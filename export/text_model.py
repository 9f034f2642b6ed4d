"""Export a Hugging Face sequence classifier (RADAR, or any text-classification spec's checkpoint), or with --task
feature-extraction any encoder as a sentence embedder, to ONNX for Triton, validated against PyTorch.

Loads the checkpoint exactly as a user with network access would (a hub id such as
TrustSafeAI/RADAR-Vicuna-7B, or a local directory such as a stand-in from `export.standins`),
exports fp32 logits with named dynamic axes, checks the graph's signature, compares ONNX Runtime
with PyTorch on padded batches of mixed lengths and fails above --atol. Writes into --out:
model.onnx, the fast tokenizer's tokenizer.json, export.json with what serving needs
(max_tokens, pad_token_id, ai_label_index) and the validation result, and token_lengths.json: the
token count of every chunk of a fixed sample of texts (chunked at --max-chars as served), from
which the repository builder chooses the length buckets. Weights go to
model.onnx.data only when they near protobuf's 2 GiB limit (a RoBERTa-large fits in one file).

For the CPU it writes faster graphs beside model.onnx (export.cpu_graphs), each with a gate, and
links the one --precision chooses as model.cpu.onnx, which the CPU profile serves:
- fused (the default): model.fused.onnx, attention, layer norm and GELU fused; numerically the
  same graph, so it must pass the same --atol check against PyTorch as model.onnx.
- int8: also model.int8.onnx, the fused graph dynamically quantized. It cannot pass --atol, so its
  gate (export.accuracy_gate) compares AI probabilities with FP32 PyTorch on texts in several
  languages, against thresholds the options set; the export fails above them.
- fp32: model.onnx itself.
model.onnx stays the FP32 graph as exported: TensorRT and the GPU profile build from it.

export.json also holds the served-numerics canary: a few one-chunk texts in several languages with
the source model's AI probability for each and the tolerance the served path must meet
(kit.control.canary runs them through the served model).

It also saves the model and tokenizer it exported into checkpoint/, for the PyTorch runner
(kit.runners.torch, the gpu-embedded profile), so that runner serves exactly the exported weights.
That is a second copy of the weights: small for the tiny stand-in, about 1.4 GB for a
RoBERTa-large; --no-checkpoint skips it where only ONNX is served.

An encoder (--task feature-extraction) exports the same way to an `embeddings` output: its last hidden state pooled
(--pooling mean or cls) and L2-normalised where --normalize says (kit.runners.torch_models.PooledEmbeddings). Left
unset, both follow the checkpoint's sentence-transformers files (modules.json and its Pooling module's config), as
sentence-transformers would load it, else mean pooling without normalisation. It has no INT8 graph or canary (both
judge a classifier's probabilities), and its checkpoint/ carries the pooling (pooling.json) for the PyTorch runner.

    python -m export.text_model --model TrustSafeAI/RADAR-Vicuna-7B --out artifacts/radar [--precision int8]
    python -m export.text_model --task feature-extraction --model DIR --out artifacts/models/NAME
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import onnxscript
import torch
import transformers

from export.accuracy_gate import Thresholds, agreement
from export.cpu_graphs import WEIGHT_FORMATS, fuse, quantize_int8, remove_graph
from export.onnx_validate import (
    Batch,
    TensorSpec,
    ValidationError,
    abs_diffs,
    check_signature,
    opset,
    provenance,
    require_close,
    sha256,
)
from export.text_checkpoint import (
    CLASSIFICATION,
    FEATURE_EXTRACTION,
    ExportError,
    load_model,
    load_tokenizer,
    max_tokens,
    pad_token_id,
    write_tokenizer,
)
from export.text_samples import (
    CANARY_TOLERANCE,
    GATE_BATCH,
    GATE_SAMPLE,
    INPUT_NAMES,
    canary,
    gate_texts,
    padded_batches,
    sample_batches,
    torch_logits,
    torch_probabilities,
    write_token_lengths,
)
from kit.pipelines.text.aggregate import ai_probability
from kit.pipelines.text.pipeline import DEFAULT_MAX_CHARS
from kit.runners.torch_models import POOLING_FILE, POOLINGS, TokenModel

# Opset 18 is the dynamo exporter's floor and runs on the onnxruntime of current Triton releases.
DEFAULT_OPSET = 18
DEFAULT_ATOL = 1e-4
CHECKPOINT = "checkpoint"
OUTPUT_NAMES = {CLASSIFICATION: "logits", FEATURE_EXTRACTION: "embeddings"}
WHAT = {CLASSIFICATION: "a sequence classifier", FEATURE_EXTRACTION: "a text encoder"}
# A single ONNX file is a protobuf, which cannot exceed 2 GiB; keep headroom for the graph itself.
EXTERNAL_DATA_THRESHOLD = 2**31 - 2**27
GRAPHS = {"fp32": "model.onnx", "fused": "model.fused.onnx", "int8": "model.int8.onnx"}
CPU_GRAPH = "model.cpu.onnx"
DEFAULT_PRECISION = "fused"


def step(message: str) -> None:
    print(f"[export.text_model] {message}", file=sys.stderr, flush=True)


def onnx_probabilities(path: Path, batches: list[Batch], ai_label_index: int) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    output = OUTPUT_NAMES[CLASSIFICATION]
    return np.concatenate([ai_probability(session.run([output], batch)[0], ai_label_index) for batch in batches])


def needs_external_data(model: torch.nn.Module) -> bool:
    size = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    return size >= EXTERNAL_DATA_THRESHOLD


def export_onnx(
    model: TokenModel, example: Batch, path: Path, opset_version: int, external_data: bool, output: str, inputs=INPUT_NAMES
) -> None:
    """torch's dynamo exporter with named Dims: it renames the graph's axes to batch_size/sequence_length."""
    axes = {0: torch.export.Dim("batch_size"), 1: torch.export.Dim("sequence_length")}
    args = tuple(torch.from_numpy(example[name]) for name in inputs)
    with torch.no_grad(), warnings.catch_warnings():
        # Both inputs share the two Dims on purpose; torch warns that it renames each axis once.
        warnings.filterwarnings("ignore", message="# The axis name")
        program = torch.onnx.export(
            model,
            args,
            dynamo=True,
            input_names=list(inputs),
            output_names=[output],
            opset_version=opset_version,
            dynamic_shapes={name: axes for name in inputs},
        )
    data = path.with_name(path.name + ".data")
    data.unlink(missing_ok=True)  # a stale weights file from an earlier export must not linger
    program.save(str(path), external_data=external_data)


def expected_signature(
    width: int, output: str = OUTPUT_NAMES[CLASSIFICATION], names=INPUT_NAMES
) -> tuple[list[TensorSpec], list[TensorSpec]]:
    axes = ("batch_size", "sequence_length")
    inputs = [TensorSpec(name, np.dtype(np.int64), axes) for name in names]
    return inputs, [TensorSpec(output, np.dtype(np.float32), ("batch_size", width))]


def validate(path: Path, batches: list[Batch], expected: list[np.ndarray], atol: float, output: str) -> float:
    """Max abs difference of the outputs over all batches from PyTorch's (`expected`); raises ValidationError above atol."""
    diffs = abs_diffs(path, batches, [{output: logits} for logits in expected])
    for batch, diff in zip(batches, diffs):
        rows, length = batch["input_ids"].shape
        padded = int((batch["attention_mask"] == 0).sum())
        step(f"  batch {rows}x{length} ({padded} padding tokens): max abs diff {diff:.3g}")
    return require_close(diffs, atol)


def link_cpu_graph(out: Path, graph: str) -> None:
    """model.cpu.onnx as a hard link: no second copy of the weights. A weights file beside the graph
    keeps its own name, which the graph refers to."""
    target = out / CPU_GRAPH
    target.unlink(missing_ok=True)
    target.hardlink_to(out / graph)


def cpu_graphs(
    model: TokenModel,
    tokenizer,
    out: Path,
    precision: str,
    batches: list[Batch],
    expected: list[np.ndarray],
    atol: float,
    limits: Thresholds,
    limit: int,
    ai_label_index: int,
    external: bool,
    also_int8: bool = False,
    output: str = OUTPUT_NAMES[CLASSIFICATION],
) -> dict:
    """The fused and INT8 graphs `precision` (or `also_int8`) asks for, each through its gate; returns
    what export.json records."""
    graphs: dict[str, dict] = {}
    if precision == "fp32" and not also_int8:
        return graphs
    fused = out / GRAPHS["fused"]
    step(f"fusing attention, layer norm and GELU into {fused}")
    fusions = fuse(out / GRAPHS["fp32"], fused, external)
    if "attention" not in fusions:
        step("  warning: no attention fusion matched this graph; the fused graph will gain little")
    step(f"validating the fused graph against PyTorch (atol {atol:g})")
    try:
        diff = validate(fused, batches, expected, atol, output)
    except ValidationError as exc:
        raise ValidationError(f"the fused graph: {exc}; --precision fp32 serves the unfused graph") from None
    graphs["fused"] = {"file": fused.name, "fusions": fusions, "max_abs_diff": diff}
    if precision == "int8" or also_int8:
        graphs["int8"] = int8_graph(model, tokenizer, fused, out / GRAPHS["int8"], limits, limit, ai_label_index, external)
    return graphs


def int8_graph(
    model: TokenModel,
    tokenizer,
    fused: Path,
    quantized: Path,
    limits: Thresholds,
    limit: int,
    ai_label_index: int,
    external: bool,
) -> dict:
    """The fastest INT8 weight format that passes the gate on this CPU (export.cpu_graphs.WEIGHT_FORMATS): the
    signed one where its kernel does not saturate, else the unsigned one; what export.json records of it."""
    texts = gate_texts(DEFAULT_MAX_CHARS)
    sample = padded_batches(tokenizer, texts, limit, GATE_BATCH)
    reference = torch_probabilities(model, sample, ai_label_index)
    failed = []
    for weights in WEIGHT_FORMATS:
        step(f"quantizing the fused graph to INT8 ({weights} weights) into {quantized}")
        ops = quantize_int8(fused, quantized, external, weights)
        step(f"gating INT8 against FP32 PyTorch on {len(texts)} texts (AI probabilities)")
        result = agreement(reference, onnx_probabilities(quantized, sample, ai_label_index))
        step(
            f"  max abs diff {result.max_abs_diff:.4g}, mean {result.mean_abs_diff:.4g}, "
            f"decisions agree on {result.agreement:.2%} (the reference calls {result.reference_positive_share:.0%} AI)"
        )
        if not result.failures(limits):
            sample_spec = {"texts": "export.text_samples.gate_texts", **GATE_SAMPLE}
            accuracy = result.record(limits)
            return {
                "file": quantized.name,
                "weights": weights,
                "quantized_ops": ops,
                "accuracy": accuracy,
                "sample": sample_spec,
                "rejected": failed,
            }
        failed.append({"weights": weights, "failures": result.failures(limits)})
    remove_graph(quantized)
    reasons = "; ".join(f"{f['weights']} weights: {', '.join(f['failures'])}" for f in failed)
    raise ValidationError(f"the INT8 graph fails its accuracy gate on {len(texts)} texts in every weight format ({reasons})")


def export(
    source: str,
    out: Path,
    atol: float = DEFAULT_ATOL,
    opset_version: int = DEFAULT_OPSET,
    ai_label_index: int = 0,
    max_chars: int = DEFAULT_MAX_CHARS,
    checkpoint: bool = True,
    precision: str = DEFAULT_PRECISION,
    limits: Thresholds = Thresholds(),
    also_int8: bool = False,
    task: str = CLASSIFICATION,
    pooling: str | None = None,
    normalize: bool | None = None,
) -> dict:
    """Export, validate and describe; export.json is written last, only when every gate passed."""
    if precision not in GRAPHS:
        raise ExportError(f"precision {precision!r} is not one of {', '.join(GRAPHS)}")
    if task not in OUTPUT_NAMES:
        raise ExportError(f"task {task!r} is not one of {', '.join(OUTPUT_NAMES)}")
    classifier = task == CLASSIFICATION
    if not classifier and (precision == "int8" or also_int8):
        raise ExportError("an encoder has no INT8 graph: its gate judges a classifier's probabilities")
    output = OUTPUT_NAMES[task]
    step(f"loading {source}")
    try:
        module = load_model(source, task, pooling, normalize)  # first: an unknown architecture is the clearest reason
        tokenizer = load_tokenizer(source)
    except (OSError, ValueError, KeyError) as exc:  # missing directory, unknown hub id or architecture, no network
        raise ExportError(f"cannot load {source} as {WHAT[task]}: {exc}") from exc
    model = module.model
    num_labels = model.config.num_labels
    if classifier and not 0 <= ai_label_index < num_labels:
        raise ExportError(f"--ai-label-index {ai_label_index} is not a label of this {num_labels}-label model")
    limit = max_tokens(model.config, tokenizer)
    pad = pad_token_id(tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    (out / "export.json").unlink(missing_ok=True)
    shutil.rmtree(out / CHECKPOINT, ignore_errors=True)  # weights of an earlier export must not outlive it
    for name in (*GRAPHS.values(), CPU_GRAPH):
        remove_graph(out / name)
    batches = sample_batches(tokenizer, limit)
    path = out / "model.onnx"
    external = needs_external_data(model)
    if not classifier:
        step(f"pooling: {module.pooling}, L2-normalised: {module.normalize}")
    step(f"exporting to {path} (opset {opset_version}, external data: {external})")
    try:
        expected = [torch_logits(module, batch) for batch in batches]
    except (IndexError, RuntimeError, ValueError) as exc:  # e.g. a tokenizer whose ids or lengths the model lacks
        raise ExportError(f"PyTorch cannot run {source} on the sample inputs ({type(exc).__name__}: {exc})") from exc
    width = int(expected[0].shape[-1])
    export_onnx(module, batches[1], path, opset_version, external, output)
    check_signature(path, *expected_signature(width, output))
    step(f"validating ONNX Runtime against PyTorch (atol {atol:g})")
    max_abs_diff = validate(path, batches, expected, atol, output)
    graphs = {"fp32": {"file": path.name, "max_abs_diff": max_abs_diff}}
    graphs |= cpu_graphs(
        module, tokenizer, out, precision, batches, expected, atol, limits, limit, ai_label_index, external, also_int8, output
    )
    link_cpu_graph(out, GRAPHS[precision])
    step(f"serving {GRAPHS[precision]} on CPU (linked as {CPU_GRAPH})")
    tolerance = limits.max_abs_diff if precision == "int8" else CANARY_TOLERANCE
    golden = canary(module, tokenizer, limit, max_chars, ai_label_index, tolerance) if classifier else None
    write_tokenizer(tokenizer, out / "tokenizer.json")
    chunks = write_token_lengths(out / "tokenizer.json", limit, max_chars, out / "token_lengths.json")
    step(f"measured the token lengths of {chunks} sample chunks of at most {max_chars} characters")
    if checkpoint:
        step(f"saving the exported model and tokenizer into {out / CHECKPOINT}")
        model.save_pretrained(out / CHECKPOINT)
        tokenizer.save_pretrained(out / CHECKPOINT)
        if not classifier:
            pooled = {"pooling": module.pooling, "normalize": module.normalize}
            (out / CHECKPOINT / POOLING_FILE).write_text(json.dumps(pooled) + "\n")
    if classifier:
        head = {
            "num_labels": num_labels,
            "id2label": {str(index): label for index, label in model.config.id2label.items()},
            "ai_label_index": ai_label_index,
        }
    else:
        head = {"dimensions": width, "pooling": module.pooling, "normalize": module.normalize}
    meta = {
        "source": source,
        "task": task,
        "model_type": model.config.model_type,
        **head,
        "max_tokens": limit,
        "pad_token_id": pad,
        "inputs": list(INPUT_NAMES),
        "outputs": [output],
        "opset": opset(path),
        "external_data": path.name + ".data" if external else None,
        "atol": atol,
        "max_abs_diff": max_abs_diff,
        "onnx_sha256": sha256(path),
        "precision": precision,
        "cpu_graph": GRAPHS[precision],
        "graphs": graphs,
        "canary": golden,
        "checkpoint": CHECKPOINT if checkpoint else None,
        **provenance(torch, transformers, onnx, onnxruntime, onnxscript),
    }
    (out / "export.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="hub id or local checkpoint directory")
    parser.add_argument("--task", choices=list(OUTPUT_NAMES), default=CLASSIFICATION, help="what the checkpoint is exported as")
    parser.add_argument("--pooling", choices=POOLINGS, help="feature-extraction: how token states become one embedding")
    parser.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        help="feature-extraction: L2-normalise each embedding (default: as the checkpoint's sentence-transformers files say)",
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for model.onnx, tokenizer.json, export.json")
    parser.add_argument("--atol", type=float, default=DEFAULT_ATOL, help="max abs logit difference allowed")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    parser.add_argument("--ai-label-index", type=int, default=0, help="label whose softmax probability means AI-generated")
    parser.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS, help="chunk size served (radar's max_chars)")
    parser.add_argument(
        "--no-checkpoint",
        dest="checkpoint",
        action="store_false",
        help="do not save the model and tokenizer into checkpoint/ (the PyTorch runner needs them)",
    )
    parser.add_argument(
        "--precision",
        choices=list(GRAPHS),
        default=DEFAULT_PRECISION,
        help="the graph the CPU serves (model.cpu.onnx): fp32 as exported, fused (default) or int8 (gated)",
    )
    parser.add_argument(
        "--also-int8",
        action="store_true",
        help="also write and gate model.int8.onnx while the CPU serves --precision (benchmarks compare the graphs)",
    )
    gate = Thresholds()
    parser.add_argument(
        "--int8-max-diff", type=float, default=gate.max_abs_diff, help="INT8 gate: max abs AI-probability difference"
    )
    parser.add_argument(
        "--int8-mean-diff", type=float, default=gate.mean_abs_diff, help="INT8 gate: mean abs AI-probability difference"
    )
    parser.add_argument(
        "--int8-min-agreement",
        type=float,
        default=gate.min_agreement,
        help="INT8 gate: least share of decisions at 0.5 that agree",
    )
    args = parser.parse_args(argv)
    limits = Thresholds(args.int8_max_diff, args.int8_mean_diff, args.int8_min_agreement)
    try:
        meta = export(
            args.model,
            args.out,
            args.atol,
            args.opset,
            args.ai_label_index,
            args.max_chars,
            args.checkpoint,
            args.precision,
            limits,
            args.also_int8,
            args.task,
            args.pooling,
            args.normalize,
        )
    except (ExportError, ValidationError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)  # one line: a caller reports the last
        return 1
    print(
        f"exported {args.model} ({args.task}) to {args.out / 'model.onnx'}: max abs diff {meta['max_abs_diff']:.3g} "
        f"<= atol {args.atol:g}, max_tokens {meta['max_tokens']}, opset {meta['opset']}; CPU serves {meta['cpu_graph']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
