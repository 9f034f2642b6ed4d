"""Everything a GPU run computes in PyTorch itself, in a child process of its own so that the orchestrator
never holds a CUDA context or a model while servers are measured:

1. the models, generated where they are served (weights cannot be carried): RADAR's RoBERTa-large-shaped
   stand-in with roberta-large's vocabulary size (export.standins, as export.gpu_levers builds it) and the
   stand-in's tokenizer, written as export.radar writes them but without the ONNX file (tokenizer.json,
   export.json, token_lengths.json, checkpoint/); ResNet-50's stand-in (export.resnet) as checkpoint/;
2. ResNet's cost model measured on this device through the kit's PyTorch runner, as the backbone runs
   served (numpy in, numpy out), fitted by CostModel.fit into the cost.json the `cost` merge policy reads;
3. the limit: every chunk of the run's texts, padded to the kit's length buckets (its gpu-embedded build),
   through the same runner offline in batches, per batch size;
4. FP32 references on the CPU (what the CPU server computes, up to the ONNX export's 1e-5) for the first
   texts and images, which the served FP16 results are compared with.

    python -m perf.gpu.prepare --out WORK/models --device cuda      # run by python -m perf.gpu
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers

from export.gpu_levers import RADAR_VOCAB, environment
from export.radar import max_tokens, pad_token_id, write_token_lengths, write_tokenizer
from export.resnet import make_standin as make_resnet_standin
from export.standins import build_model, corpus, make_config, train_tokenizer, wrap_tokenizer
from kit.adapters.artifacts import radar_pipeline
from kit.pipelines.batching.merge import CostModel
from kit.pipelines.text.radar import DEFAULT_MAX_CHARS, RadarPipeline
from kit.runners.torch import TorchModel, TorchOptions
from perf.gpu.inputs import radar_texts, resnet_images
from perf.gpu.nvml import GpuSampler
from perf.gpu.plan import FULL, QUICK, Mode
from perf.gpu.targets import CHECKPOINT, Placement, radar_settings
from perf.workloads.radar import RADAR
from perf.workloads.radar_limit import batches, chunk_rows

SEED = 0


def step(message: str) -> None:
    print(f"[prepare] {message}", flush=True)


def radar_standin(mode: Mode, folder: Path) -> int:
    """RADAR's files as export.radar writes them, minus the ONNX model; returns the parameter count."""
    tokenizer = wrap_tokenizer(train_tokenizer(corpus()))
    model = build_model(make_config(mode.radar_size, RADAR_VOCAB), SEED)
    model.save_pretrained(folder / CHECKPOINT)
    tokenizer.save_pretrained(folder / CHECKPOINT)
    write_tokenizer(tokenizer, folder / "tokenizer.json")
    limit = max_tokens(model.config, tokenizer)
    write_token_lengths(folder / "tokenizer.json", limit, DEFAULT_MAX_CHARS, folder / "token_lengths.json")
    meta = {
        "source": f"export.standins {mode.radar_size} shape, vocabulary {RADAR_VOCAB}, seed {SEED} (random weights; no ONNX)",
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


def resnet_standin(mode: Mode, folder: Path) -> int:
    model = make_resnet_standin(mode.resnet_size, SEED)
    model.save_pretrained(folder / CHECKPOINT)
    return sum(p.numel() for p in model.parameters())


def runner(folder: Path, output: str, placement: Placement) -> TorchModel:
    return TorchModel.from_checkpoint(folder / CHECKPOINT, [output], TorchOptions(placement.dtype, placement.device))


def radar_references(folder: Path, pipeline: RadarPipeline, texts: list[str]) -> list[dict]:
    """Score and chunk scores of each text in FP32 on the CPU, through the kit's pipeline."""
    model = runner(folder, "logits", Placement("cpu", "fp32"))
    out = []
    for text in texts:
        plan = pipeline.plan(text)
        logits = [model({"input_ids": g.input_ids, "attention_mask": g.attention_mask})["logits"] for g in plan.groups]
        result = pipeline.finish(plan, logits)
        out.append({"score": float(result.score), "chunk_scores": result.chunk_scores.tolist()})
    return out


def resnet_references(folder: Path, images: list[np.ndarray]) -> list[list[float]]:
    """Each image's class probabilities in FP32 on the CPU, unpadded."""
    model = runner(folder, "probs", Placement("cpu", "fp32"))
    sizes = lambda image: np.array([image.shape[2:]], dtype=np.int64)  # noqa: E731
    return [model({"pixel_values": image, "image_sizes": sizes(image)})["probs"][0].tolist() for image in images]


def radar_limit(model: TorchModel, rows: list, batch_sizes: tuple[int, ...]) -> dict:
    """Chunks/s of the runner over every chunk, bucket by bucket in batches, per batch size (one untimed pass
    first: the first call of each shape selects kernels), with the GPU sampled over the timed pass."""
    layouts = []
    for batch in batch_sizes:
        work = batches(rows, batch)
        for ids, mask in work:
            model({"input_ids": ids, "attention_mask": mask})
        with GpuSampler(lambda: {os.getpid()}, delay_s=0.0) as gpu:
            start = time.perf_counter()
            for ids, mask in work:
                model({"input_ids": ids, "attention_mask": mask})
            seconds = time.perf_counter() - start
        layouts.append({"batch": batch, "chunks_per_s": len(rows) / seconds, "seconds": seconds, "gpu": gpu.summary()})
        step(f"  limit batch {batch}: {layouts[-1]['chunks_per_s']:.1f} chunks/s")
    return {"chunks": len(rows), "layouts": layouts, "best": max(layouts, key=lambda r: r["chunks_per_s"])}


def resnet_cost(model: TorchModel, mode: Mode) -> tuple[CostModel, list[tuple[int, int, float]]]:
    """Median seconds per backbone run of square images per side and batch size, through the runner."""
    rng = np.random.default_rng(SEED)
    samples = []
    for side in mode.cost_sides:
        for batch in mode.cost_batches:
            feed = {
                "pixel_values": rng.standard_normal((batch, 3, side, side), dtype=np.float32),
                "image_sizes": np.full((batch, 2), side, dtype=np.int64),
            }
            model(feed)
            times = []
            for _ in range(mode.cost_repeats):
                start = time.perf_counter()
                model(feed)
                times.append(time.perf_counter() - start)
            samples.append((batch, 3 * side * side, statistics.median(times)))
    return CostModel.fit(samples), samples


def prepare(mode: Mode, out: Path, placement: Placement) -> dict:
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        seconds[name] = round(time.perf_counter() - clock, 1)
        step(f"{name}: {seconds[name]} s")
        clock = time.perf_counter()

    radar_dir, resnet_dir = out / "radar", out / "resnet50"
    radar_dir.mkdir(parents=True, exist_ok=True)
    resnet_dir.mkdir(parents=True, exist_ok=True)
    radar_params = radar_standin(mode, radar_dir)
    lap("radar stand-in")
    resnet_params = resnet_standin(mode, resnet_dir)
    lap("resnet stand-in")
    settings = radar_settings(RADAR, radar_dir, out / "settings", placement)
    pipeline = radar_pipeline(radar_dir, settings)
    texts, images = radar_texts(mode), resnet_images()
    rows = chunk_rows(pipeline, texts)
    radar_reference = radar_references(radar_dir, pipeline, texts[: mode.reference_texts])
    resnet_reference = resnet_references(resnet_dir, images[: mode.reference_images])
    lap("FP32 references")
    cost, samples = resnet_cost(runner(resnet_dir, "probs", placement), mode)
    cost_json = {"model": cost.to_json(), "device": placement.device, "dtype": placement.dtype, "samples": samples}
    (resnet_dir / "cost.json").write_text(json.dumps(cost_json, indent=1) + "\n")
    lap("resnet cost model")
    limit = radar_limit(runner(radar_dir, "logits", placement), rows, mode.limit_batches)
    lap("radar limit")
    return {
        "environment": environment(placement.device),
        "placement": {"device": placement.device, "dtype": placement.dtype},
        "seconds": seconds,
        "radar": {
            "size": mode.radar_size,
            "parameters": radar_params,
            "buckets": list(settings.buckets),
            "chunks_per_text": len(rows) / len(texts),
            "limit": limit,
            "reference": radar_reference,
        },
        "resnet": {"size": mode.resnet_size, "parameters": resnet_params, "cost": cost_json, "reference": resnet_reference},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="model folders (radar/, resnet50/) and prepare.json")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny models (the CPU dry run)")
    args = parser.parse_args(argv)
    result = prepare(QUICK if args.quick else FULL, args.out, Placement.for_device(args.device))
    (args.out / "prepare.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
