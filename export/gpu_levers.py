"""FP16 against FP32 and batch size on a GPU, in PyTorch: the two levers docs/GPU.md names.

docs/GPU.md serves `radar_classifier` in FP16 with batches of up to 32 and leaves the ResNet-50 at
FP32, all of it unmeasured. This script measures, on whatever CUDA GPU it runs on, for RADAR's
shape (a RoBERTa-large `RobertaForSequenceClassification`, ~355M parameters, 2 labels) and for
ResNet-50 (`ResNetForImageClassification`, ResNetConfig's defaults, 1000 labels):

1. accuracy: the AI probability (softmax of the logits, label 0, as the kit scores a chunk) of a
   pure FP16 model (`model.half()`) against the FP32 one, on a few hundred chunks per length bucket
   (random token ids of random lengths inside the bucket, padded to it), at two weight scales
   (roberta's init 0.02, and 0.2: FP16's error depends on the weights); for ResNet-50 every class
   probability and the top-1 class, on 224x224 random normal images;
2. speed: median time per batch (CUDA events), items/s, the GPU's busy time per batch (summed
   kernel durations from the profiler: what is left once the host's launch gaps are gone, as in
   an engine or a CUDA graph) and peak GPU memory (`torch.cuda.max_memory_allocated`, weights
   included) against batch size, FP32 and FP16, per bucket length and at 224x224.

Weights are random from a fixed seed (the kit's stand-ins: real RADAR cannot be downloaded where the
kit is developed), so the scores mean nothing; compute and memory per item are the real model's.
FP32 runs with TF32 off (`torch.backends.cuda.matmul.allow_tf32` and `cudnn.allow_tf32` False);
cuDNN autotuning is on. This is PyTorch eager on one GPU: not a TensorRT or ONNX Runtime engine, not
the Triton server.

    python -m export.gpu_levers --out perf/results/gpu/h100_levers.json    # on a CUDA host
    python -m export.gpu_levers --device cpu --quick --out /tmp/levers.json  # tiny models, a dry run
    .venv/export/bin/python -m export.gpu_levers --device cpu --quick --out /tmp/levers.json  # the same, here

Builds the models with the kit's own stand-in code (export.standins, export.resnet), so it runs where
they do: the export venv here, or a GPU host's PyTorch (torch, transformers, tokenizers, onnx,
onnxruntime, numpy). The committed run's raw output is perf/results/gpu/.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import torch
import transformers
from transformers import ResNetForImageClassification, RobertaForSequenceClassification

from export.resnet import make_standin as make_resnet_standin
from export.standins import build_model, make_config

# RADAR-Vicuna-7B's shape: roberta-large's config with two labels (export/standins.py, size large),
# with roberta-large's vocabulary size.
RADAR_VOCAB = 50265
PAD_ID, BOS_ID, EOS_ID = 1, 0, 2
AI_LABEL = 0
# The buckets the repository builder chooses for the large stand-in's tokenizer (README).
BUCKETS = (48, 72, 104, 224, 512)
BATCHES = (1, 8, 16, 32, 64)
# The default init (0.02) gives near-constant scores; 0.2 (the tiny stand-in's) spreads them.
RADAR_INITS = (0.02, 0.2)


def radar_model(quick: bool, seed: int, initializer_range: float = 0.02) -> RobertaForSequenceClassification:
    """The kit's RADAR stand-in (export/standins.py) with roberta-large's vocabulary size, built on the CPU."""
    config = make_config("tiny" if quick else "large", RADAR_VOCAB)
    config.initializer_range = initializer_range
    return build_model(config, seed)


def resnet_model(quick: bool, seed: int) -> ResNetForImageClassification:
    """The kit's ResNet-50 stand-in (export/resnet.py): random weights, BatchNorm statistics from
    one pass over random images, built on the CPU."""
    return make_resnet_standin("tiny" if quick else "resnet50", seed)


def token_batch(gen: torch.Generator, count: int, low: int, bucket: int, vocab: int) -> dict[str, torch.Tensor]:
    """`count` chunks of low..bucket tokens (<s> ... </s>), random ids, padded to `bucket`."""
    lengths = torch.randint(low, bucket + 1, (count,), generator=gen)
    ids = torch.randint(5, vocab, (count, bucket), generator=gen)
    positions = torch.arange(bucket).expand(count, bucket)
    mask = (positions < lengths[:, None]).long()
    ids = torch.where(mask.bool(), ids, torch.full_like(ids, PAD_ID))
    ids[:, 0] = BOS_ID
    ids[torch.arange(count), lengths - 1] = EOS_ID
    return {"input_ids": ids, "attention_mask": mask}


def bucket_low(buckets: tuple[int, ...], index: int) -> int:
    return buckets[index - 1] + 1 if index else 3


def to(batch: dict[str, torch.Tensor], device: str, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    return {k: v.to(device=device, dtype=dtype if v.is_floating_point() and dtype else v.dtype) for k, v in batch.items()}


def diff_stats(p32: torch.Tensor, p16: torch.Tensor, l32: torch.Tensor, l16: torch.Tensor) -> dict:
    dp = (p32 - p16).abs()
    return {
        "n": int(p32.shape[0]),
        "fp32_prob_mean": p32.mean().item(),
        "fp32_prob_min": p32.min().item(),
        "fp32_prob_max": p32.max().item(),
        "max_abs_prob_diff": dp.max().item(),
        "mean_abs_prob_diff": dp.mean().item(),
        "max_abs_logit_diff": (l32 - l16).abs().max().item(),
        "fp32_max_abs_logit": l32.abs().max().item(),
        "top1_agreement": (l32.argmax(-1) == l16.argmax(-1)).float().mean().item(),
        "fp16_nonfinite": int((~torch.isfinite(l16)).sum().item()),
    }


@torch.inference_mode()
def radar_accuracy(model: torch.nn.Module, args, init: float) -> list[dict]:
    half = copy.deepcopy(model).half()
    gen = torch.Generator().manual_seed(args.seed + 1)
    rows = []
    for index, bucket in enumerate(args.buckets):
        p32s, p16s, l32s, l16s = [], [], [], []
        for start in range(0, args.chunks, args.accuracy_batch):
            batch = to(
                token_batch(
                    gen, min(args.accuracy_batch, args.chunks - start), bucket_low(args.buckets, index), bucket, RADAR_VOCAB
                ),
                args.device,
            )
            l32 = model(**batch).logits.float()
            l16 = half(**batch).logits.float()
            l32s.append(l32), l16s.append(l16)
            p32s.append(l32.softmax(-1)[:, AI_LABEL]), p16s.append(l16.softmax(-1)[:, AI_LABEL])
        stats = diff_stats(torch.cat(p32s), torch.cat(p16s), torch.cat(l32s), torch.cat(l16s))
        rows.append({"model": "radar", "initializer_range": init, "input": f"{bucket} tokens", "tokens": bucket, **stats})
    del half
    return rows


@torch.inference_mode()
def resnet_accuracy(model: torch.nn.Module, args) -> list[dict]:
    half = copy.deepcopy(model).half()
    gen = torch.Generator().manual_seed(args.seed + 2)
    p32s, p16s, l32s, l16s = [], [], [], []
    for start in range(0, args.images, args.accuracy_batch):
        images = torch.randn(min(args.accuracy_batch, args.images - start), 3, args.image_size, args.image_size, generator=gen)
        l32 = model(pixel_values=images.to(args.device)).logits.float()
        l16 = half(pixel_values=images.to(args.device, torch.float16)).logits.float()
        l32s.append(l32), l16s.append(l16)
        p32s.append(l32.softmax(-1)), p16s.append(l16.softmax(-1))
    p32, p16 = torch.cat(p32s), torch.cat(p16s)
    stats = diff_stats(p32, p16, torch.cat(l32s), torch.cat(l16s))
    stats["n"] = int(p32.shape[0])  # images; the probability statistics run over all their classes
    del half
    return [{"model": "resnet50", "initializer_range": None, "input": f"{args.image_size}x{args.image_size}", **stats}]


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@torch.inference_mode()
def gpu_ms(model: torch.nn.Module, batch: dict, repeats: int = 3) -> float | None:
    """GPU busy time per forward pass: the summed durations of its kernels (and copies), from the
    profiler. Eager PyTorch's time per batch also holds the host's launch gaps; this does not."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            model(**batch)
        torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.events() if e.device_type == DeviceType.CUDA)
    return total_us / repeats / 1000 if total_us else None


@torch.inference_mode()
def time_batch(model: torch.nn.Module, batch: dict, args) -> dict:
    """Median milliseconds per forward pass after warm-ups; peak memory over the whole run (cuDNN
    autotuning included) and over the timed runs alone; GPU busy time from the profiler."""
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    for _ in range(args.warmup):
        model(**batch)
    synchronize(args.device)
    start = time.perf_counter()
    model(**batch)
    synchronize(args.device)
    estimate = time.perf_counter() - start
    repeats = max(args.min_repeats, min(args.max_repeats, math.ceil(args.seconds / max(estimate, 1e-6))))
    if cuda:
        warm_peak = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            model(**batch)
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            model(**batch)
            times.append((time.perf_counter() - t0) * 1000)
    result = {"repeats": repeats, "median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times)}
    if cuda:
        steady = torch.cuda.max_memory_allocated()
        result["peak_mib"] = max(warm_peak, steady) / 2**20
        result["steady_peak_mib"] = steady / 2**20
        result["steady_above_start_mib"] = (steady - before) / 2**20
        try:
            result["gpu_ms"] = gpu_ms(model, batch)
        except Exception as exc:  # the profiler is a diagnostic: never lose the timings to it
            result["gpu_ms"], result["gpu_ms_error"] = None, repr(exc)
    return result


def throughput(name: str, model: torch.nn.Module, inputs: list[tuple[str, int, dict]], args) -> list[dict]:
    """FP32 first, then the same model converted in place to FP16 (one copy on the GPU at a time)."""
    rows = []
    for precision, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
        model = model.to(dtype)
        synchronize(args.device)
        # Resident before the runs: the weights plus what is already allocated (e.g. cuBLAS workspaces).
        weights_mib = torch.cuda.memory_allocated() / 2**20 if args.device.startswith("cuda") else None
        for label, tokens, cpu_batch in inputs:
            for size in args.batches:
                batch = to({k: v[:size] for k, v in cpu_batch.items()}, args.device, dtype)
                try:
                    timing = time_batch(model, batch, args)
                except torch.cuda.OutOfMemoryError:
                    timing = {"error": "out of memory"}
                    torch.cuda.empty_cache()
                row = {
                    "model": name,
                    "input": label,
                    "tokens": tokens,
                    "precision": precision,
                    "batch": size,
                    "weights_mib": weights_mib,
                    **timing,
                }
                if "median_ms" in timing:
                    row["items_per_s"] = size / timing["median_ms"] * 1000
                if timing.get("gpu_ms"):
                    row["items_per_gpu_s"] = size / timing["gpu_ms"] * 1000
                rows.append(row)
                print(
                    f"  {name} {label} {precision} batch {size}: {timing.get('median_ms', float('nan')):.2f} ms"
                    f" ({row.get('items_per_s', float('nan')):.1f} items/s),"
                    f" GPU busy {timing.get('gpu_ms') or float('nan'):.2f} ms",
                    flush=True,
                )
                del batch
    return rows


def environment(device: str) -> dict:
    env = {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
    }
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name()
        env["cuda_runtime"] = torch.version.cuda
        env["cudnn"] = torch.backends.cudnn.version()
        try:
            query = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
            env["nvidia_smi"] = query.stdout.strip()
            env["driver"] = query.stdout.split(",")[1].strip()
        except (OSError, subprocess.SubprocessError) as exc:
            env["nvidia_smi"] = f"unavailable: {exc}"
    return env


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 or abs(value) >= 1e4 else f"{value:.{digits}f}"
    return str(value)


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = [
        f"{env['date_utc']}, {env.get('gpu', env['device'])}, driver {env.get('driver', '-')}, torch {env['torch']}"
        f" (CUDA {env.get('cuda_runtime', '-')}), transformers {env['transformers']}; random weights, seed {report['seed']};"
        " FP32 with TF32 off; FP16 = model.half(); PyTorch eager. ms: median per batch between CUDA events;"
        " GPU ms: summed kernel time per batch (profiler); peak: max_memory_allocated over the timed runs, weights included.",
        "",
        "| model | init | input | n | FP32 AI prob. mean [min, max] | max abs diff | mean abs diff | max abs logit diff"
        " | FP32 max abs logit | top-1 agree |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in report["accuracy"]:
        prob = (
            f"{r['fp32_prob_mean']:.4f} [{r['fp32_prob_min']:.4f}, {r['fp32_prob_max']:.4f}]"
            if r["model"] == "radar"
            else "(1000 classes)"
        )
        lines.append(
            f"| {r['model']} | {r['initializer_range'] or '-'} | {r['input']} | {r['n']} | {prob} | {r['max_abs_prob_diff']:.2e}"
            f" | {r['mean_abs_prob_diff']:.2e} | {r['max_abs_logit_diff']:.2e} | {r['fp32_max_abs_logit']:.3g}"
            f" | {r['top1_agreement']:.4f} |"
        )
    lines += [
        "",
        "| model | input | batch | FP32 ms | FP32 GPU ms | FP32 items/s | FP32 peak MiB | FP16 ms | FP16 GPU ms | FP16 items/s"
        " | FP16 peak MiB | FP16 speed-up (ms / GPU ms) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    by_key = {(r["model"], r["input"], r["batch"], r["precision"]): r for r in report["throughput"]}
    ratio = lambda a, b: a / b if a and b else None  # noqa: E731
    for (model, label, size, precision), r32 in by_key.items():
        if precision != "fp32":
            continue
        r16 = by_key[(model, label, size, "fp16")]
        cells = [model, label, size]
        for r in (r32, r16):
            cells += [
                fmt(r.get("median_ms"), 2),
                fmt(r.get("gpu_ms"), 2),
                fmt(r.get("items_per_s"), 1),
                fmt(r.get("steady_peak_mib"), 0),
            ]
        cells.append(
            f"{fmt(ratio(r32.get('median_ms'), r16.get('median_ms')), 2)} / {fmt(ratio(r32.get('gpu_ms'), r16.get('gpu_ms')), 2)}"
        )
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ints = lambda text: tuple(int(x) for x in text.split(","))  # noqa: E731
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny models and sizes: a dry run of the script")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--buckets", type=ints, default=BUCKETS, help="RADAR length buckets (tokens)")
    parser.add_argument("--batches", type=ints, default=BATCHES)
    parser.add_argument("--chunks", type=int, default=256, help="chunks per bucket for the accuracy check")
    parser.add_argument("--images", type=int, default=256, help="images for the accuracy check")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--accuracy-batch", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5, help="timed seconds per point, roughly")
    parser.add_argument("--min-repeats", type=int, default=5)
    parser.add_argument("--max-repeats", type=int, default=50)
    args = parser.parse_args(argv)
    if args.quick:
        args.buckets, args.batches, args.chunks, args.images, args.image_size = (48, 104), (1, 4), 16, 8, 64
        args.accuracy_batch, args.warmup, args.seconds, args.min_repeats = 8, 1, 0.05, 2
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU host, or pass --device cpu --quick for a dry run", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    report = {
        "environment": environment(args.device),
        "seed": args.seed,
        "quick": args.quick,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "notes": "random weights (stand-ins) from a fixed seed; FP32 with TF32 off for matmul and cuDNN; "
        "FP16 = model.half() (weights and activations); PyTorch eager, cuDNN autotuning on; "
        "ms = median per batch between CUDA events (host launch gaps included); GPU ms = summed kernel and copy "
        "durations per batch (torch.profiler); peak memory = torch.cuda.max_memory_allocated, weights included, "
        "peak_mib over warm-ups (cuDNN autotuning) and timed runs, steady_peak_mib over the timed runs alone",
        "accuracy": [],
        "throughput": [],
        "models": {},
    }
    print(f"# {report['environment']}", flush=True)

    gen = torch.Generator().manual_seed(args.seed + 3)
    top = max(args.batches)
    radar_inputs = [
        (f"{b} tokens", b, token_batch(gen, top, bucket_low(args.buckets, i), b, RADAR_VOCAB)) for i, b in enumerate(args.buckets)
    ]
    for init in RADAR_INITS:
        started = time.perf_counter()
        model = radar_model(args.quick, args.seed, init).to(args.device)
        report["models"]["radar"] = {
            "parameters": sum(p.numel() for p in model.parameters()),
            "attn_implementation": model.config._attn_implementation,
        }
        print(f"radar (init {init}) built in {time.perf_counter() - started:.1f} s; accuracy", flush=True)
        report["accuracy"] += radar_accuracy(model, args, init)
        if init == 0.02:
            report["throughput"] += throughput("radar", model, radar_inputs, args)
        del model
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()

    model = resnet_model(args.quick, args.seed).to(args.device)
    report["models"]["resnet50"] = {"parameters": sum(p.numel() for p in model.parameters())}
    print("resnet50 built; accuracy", flush=True)
    report["accuracy"] += resnet_accuracy(model, args)
    images = torch.randn(top, 3, args.image_size, args.image_size, generator=gen)
    report["throughput"] += throughput(
        "resnet50", model, [(f"{args.image_size}x{args.image_size}", None, {"pixel_values": images})], args
    )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
