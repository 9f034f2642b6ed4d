"""The phases of a GPU run after the prepare child: RADAR on the kit, RADAR's baselines, ResNet's variants.

Each phase starts its servers together (start-up overlaps; they idle while another is measured), measures
them one after another with the engine's closed loops and the GPU sampled over each window, and stops them
all. Before each server and each point the budget is asked; what no longer fits is recorded as skipped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import traceback
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

from kit.control.runtime import install_python_stub, triton_dist
from perf.engine.load import Window
from perf.engine.point import measure
from perf.engine.procstats import tree
from perf.engine.targets import HttpTarget
from perf.gpu.http_load import HttpWindow
from perf.gpu.inputs import radar_sets, radar_texts, resnet_images, resnet_set
from perf.gpu.nvml import GpuSampler
from perf.gpu.plan import ACCURACY_S, RESNET_VARIANTS, Budget, Mode, fit_units
from perf.gpu.targets import GpuKitTarget, GpuRadar, Placement, radar_parameters, resnet_variants
from perf.gpu.verdicts import CHUNKS
from perf.workloads.radar import RADAR
from perf.workloads.resnet import RESNET

LOG_TAIL_LINES = 30
# A server that is not ready by then is given up, so that a hung start leaves time for the other phases.
START_TIMEOUT_S = 240.0
# One accuracy request: a server that hangs fails the check instead of the whole run.
ACCURACY_TIMEOUT_S = 30.0


@dataclass
class Run:
    """What every phase shares: the mode, where the networks run, the budget, the folders and the results."""

    mode: Mode
    placement: Placement
    budget: Budget
    work: Path
    results: dict = field(default_factory=dict)
    # Called after every measured point, so that a run cut short (a hang, the device's limit) keeps its rows.
    checkpoint: Callable[[], None] = lambda: None

    @property
    def models(self) -> Path:
        return self.work / "models"

    def skip(self, what: str, why: str) -> None:
        print(f"skipped: {what} ({why})", flush=True)
        self.results["skipped"].append({"what": what, "why": why})

    def error(self, what: str, exc: BaseException, log: Path | None = None) -> None:
        print(f"error: {what}: {exc!r}", flush=True)
        entry = {"what": what, "error": repr(exc), "trace": traceback.format_exc().splitlines()[-8:]}
        if log is not None and log.is_file():
            entry["log_tail"] = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        self.results["errors"].append(entry)

    def fits_point(self, what: str, window_s: float) -> bool:
        if self.budget.allows(self.mode.point_s(window_s)):
            return True
        self.skip(what, f"{self.budget.left():.0f} s left")
        return False


def start_together(run: Run, targets: list, what: str) -> list:
    """Start every target at once; the ones that fail are recorded (with their log's tail) and left out."""
    install_python_stub(triton_dist())  # once, before servers that would each copy it
    timeout = min(START_TIMEOUT_S, max(30.0, run.budget.left()))

    def start(target):
        try:
            target.start(timeout=timeout)
            return target
        except Exception as exc:
            target.stop()
            run.error(f"{what}: starting {target.family} {target.label}", exc, target.workdir / "server.log")
            return None

    with ThreadPoolExecutor(len(targets) or 1) as pool:
        return [t for t in pool.map(start, targets) if t is not None]


def stop_all(targets: list) -> None:
    with ThreadPoolExecutor(len(targets) or 1) as pool:
        list(pool.map(lambda target: target.stop(), targets))


def point(run: Run, target, inputs, load, name: str, into: list, **extra) -> dict:
    """One measured point with the GPU sampled over its window (the target's processes' memory), added to `into`
    and saved at once."""
    pids = lambda: {p.pid for p in tree(target.pid)}  # noqa: E731
    with GpuSampler(pids, delay_s=load.warmup_s) as gpu:
        row = measure(target, inputs, load, run.work / "points", name)
    row["gpu"] = gpu.summary()
    into.append({**row, **extra})
    run.checkpoint()
    return row


def prepare(run: Run) -> None:
    command = [sys.executable, "-m", "perf.gpu.prepare", "--out", str(run.models), "--device", run.placement.device]
    subprocess.run(command + (["--quick"] if run.mode.name == "quick" else []), check=True, timeout=max(1.0, run.budget.left()))
    run.results["prepare"] = json.loads((run.models / "prepare.json").read_text())


def triton_gpu_metrics(target: GpuKitTarget) -> list[str]:
    """The GPU metric families the server exports (with --allow-gpu-metrics), e.g. nv_gpu_utilization."""
    text = urllib.request.urlopen(target.server.options.metrics_url, timeout=5).read().decode()
    return sorted(set(re.findall(r"^(nv_gpu_\w+)", text, re.M)))


def radar_accuracy(target: GpuKitTarget, texts: list[str], references: list[dict]) -> dict:
    """Served scores of the first texts against the FP32 CPU reference (the CPU server's results, up to 1e-5)."""
    client = grpcclient.InferenceServerClient(target.grpc_url)
    try:
        chunk_diffs, score_diffs = [], []
        for text, reference in zip(texts, references):
            request = grpcclient.InferInput("TEXT", [1], "BYTES")
            request.set_data_from_numpy(np.array([text.encode("utf-8")], dtype=np.object_))
            result = client.infer("radar", [request], client_timeout=ACCURACY_TIMEOUT_S)
            chunk_diffs.append(np.abs(result.as_numpy("CHUNK_SCORES") - np.array(reference["chunk_scores"])).max())
            score_diffs.append(abs(float(result.as_numpy("SCORE")[0]) - reference["score"]))
    finally:
        client.close()
    return {
        "texts": len(score_diffs),
        "chunks": sum(len(r["chunk_scores"]) for r in references),
        "max_abs_chunk_score_diff": float(max(chunk_diffs)),
        "max_abs_score_diff": float(max(score_diffs)),
    }


def resnet_accuracy(target: GpuKitTarget, images: list[np.ndarray], references: list[list[float]]) -> dict:
    """Served class probabilities of the first images (each alone) against the FP32 CPU reference."""
    client = grpcclient.InferenceServerClient(target.grpc_url)
    try:
        diffs, agree = [], 0
        for image, reference in zip(images, references):
            request = grpcclient.InferInput("INPUT", list(image.shape), "FP32")
            request.set_data_from_numpy(image)
            probs = client.infer("resnet50", [request], client_timeout=ACCURACY_TIMEOUT_S).as_numpy("PROBS")[0]
            diffs.append(np.abs(probs - np.array(reference)).max())
            agree += int(probs.argmax() == int(np.argmax(reference)))
    finally:
        client.close()
    return {"images": len(diffs), "max_abs_prob_diff": float(max(diffs)), "top1_agreement": agree / len(diffs)}


def radar_kit(run: Run) -> None:
    """The kit at every load, one server per `radar` instance count; the first also answers the accuracy check."""
    mode, prep = run.mode, run.results["prepare"]["radar"]
    texts = radar_texts(mode)
    kit_inputs, _ = radar_sets(texts, prep["chunks_per_text"])
    sweep_s = len(mode.clients) * mode.point_s(mode.window_s)
    count = fit_units(run.budget.left(), mode.start_s + ACCURACY_S, sweep_s, len(mode.radar_instances))
    for n in mode.radar_instances[count:]:
        run.skip(f"kit with {n} radar instances", "does not fit the budget")
    targets = [
        GpuKitTarget(RADAR, {"radar": {"instances": n}}, run.models / "radar", run.work / f"kit-radar-{n}", run.placement)
        for n in mode.radar_instances[:count]
    ]
    rows = run.results["radar"]["kit"]
    started = start_together(run, targets, "radar kit")
    try:
        for index, target in enumerate(started):
            instances = target.profile()["models"]["radar"]["instances"]
            if index == 0:
                run.results["radar"]["triton_gpu_metrics"] = triton_gpu_metrics(target)
                run.results["radar"]["accuracy"] = radar_accuracy(target, texts, prep["reference"])
            for clients in mode.clients:
                if not run.fits_point(f"kit, {instances} radar instances, {clients} clients", mode.window_s):
                    break
                load = Window(clients, mode.warmup_s, mode.window_s)
                point(run, target, kit_inputs, load, f"kit-{instances}-{clients}", rows, radar_instances=instances)
    finally:
        stop_all(targets)


def radar_baselines(run: Run) -> None:
    """Flask per request, then the batcher: every setting probed briefly, the best one swept."""
    mode = run.mode
    texts = radar_texts(mode)
    _, bodies = radar_sets(texts, run.results["prepare"]["radar"]["chunks_per_text"])
    workload = GpuRadar(
        radar_parameters(RADAR, run.models / "radar", run.work / "baseline-settings", run.placement), run.placement
    )
    model_dir = run.models / "radar"
    flask = HttpTarget(workload, "flask", {}, model_dir, run.work / "flask")
    batchers = [
        HttpTarget(
            workload, "batcher", {"batch_size_max": size, "batch_timeout_ms": ms}, model_dir, run.work / f"batcher-{size}-{ms}"
        )
        for size, ms in mode.batcher
    ]
    started = start_together(run, [flask, *batchers], "radar baselines")
    out = run.results["radar"]
    try:
        if flask in started:
            for clients in mode.clients:
                if not run.fits_point(f"Flask at {clients} clients", mode.window_s):
                    break
                point(run, flask, bodies, HttpWindow(clients, mode.warmup_s, mode.window_s), f"flask-{clients}", out["flask"])
            flask.stop()
        probes = []
        for batcher in (b for b in batchers if b in started):
            if not run.fits_point(f"batcher probe {batcher.label}", mode.probe_window_s):
                break
            load = HttpWindow(mode.probe_clients, mode.warmup_s, mode.probe_window_s)
            probes.append((point(run, batcher, bodies, load, f"probe-{batcher.label}", out["batcher_probes"]), batcher))
        fine = [(row, b) for row, b in probes if not row["error"]]
        if not fine:
            return
        _, best = max(fine, key=lambda pair: pair[0][CHUNKS])
        for batcher in batchers:
            if batcher is not best:
                batcher.stop()
        for clients in mode.clients:
            if not run.fits_point(f"batcher {best.label} at {clients} clients", mode.window_s):
                break
            point(run, best, bodies, HttpWindow(clients, mode.warmup_s, mode.window_s), f"batcher-{clients}", out["batcher"])
    finally:
        stop_all([flask, *batchers])


def resnet(run: Run) -> None:
    """Every batching variant at every load, each on its own server; the first also answers the accuracy check."""
    mode = run.mode
    images = resnet_images()
    inputs = resnet_set(images)
    variants = resnet_variants()
    sweep_s = len(mode.resnet_clients) * mode.point_s(mode.window_s)
    count = fit_units(run.budget.left(), mode.start_s + ACCURACY_S, sweep_s, len(variants))
    for label in RESNET_VARIANTS[count:]:
        run.skip(f"resnet variant {label}", "does not fit the budget")
    targets = [
        GpuKitTarget(RESNET, setting, run.models / "resnet50", run.work / f"kit-resnet-{label}", run.placement)
        for label, setting in zip(RESNET_VARIANTS, variants[:count])
    ]
    started = start_together(run, targets, "resnet")
    try:
        for index, target in enumerate(started):
            if index == 0:
                references = run.results["prepare"]["resnet"]["reference"]
                run.results["resnet"]["accuracy"] = resnet_accuracy(target, images, references)
            for clients in mode.resnet_clients:
                if not run.fits_point(f"resnet {target.label} at {clients} clients", mode.window_s):
                    break
                load = Window(clients, mode.warmup_s, mode.window_s)
                point(run, target, inputs, load, f"resnet-{target.label}-{clients}", run.results["resnet"]["rows"])
    finally:
        stop_all(targets)
