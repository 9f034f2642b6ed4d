"""Paddle Serving's dynamic-padding experiment, on the kit: ResNet-50 on images of shape
(3, 224±50, 224±50) from N closed-loop clients, four batching variants side by side.

    python -m perf.resnet_padding --quick                       # 3 client counts, short runs (~5 min)
    python -m perf.resnet_padding --report perf/RESULTS.md       # 1-70 clients (~25 min)

Variants, each a repository built by code from the committed sources (resnet50 and its backbone
only, the CPU profile's layout) and a fresh server:

    none     every request computed alone (merge policy `none`)
    triton   Triton's plain dynamic batching: no ragged batches, so equal shapes only
    paddle   Paddle Serving's merge rule
    cost     the kit's cost rule (the committed default)

Per client count: a warm-up, then a measured window: requests/s, p50/p99 latency, the padding
waste and images per backbone run (from resnet50's counters and the backbone's statistics), the
backbone's busy share (its compute time over the window) and the CPU of server and client.
Writes results.json, results.csv, a plot (throughput and p99 vs clients) and, with --report, the
"## ResNet50: padding-aware batching" section of that Markdown file (other sections are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import platform
import re
import shlex
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil
import tritonclient.grpc.aio as aioclient

from kit.repository import REPO_ROOT, SOURCE, build, parse_config, render_config
from kit.runtime import ServerOptions, TritonServer
from perf.procstats import cpu_seconds

MODELS = ("resnet50", "resnet50_backbone")
VARIANTS = ("none", "triton", "paddle", "cost")
HEADING = "## ResNet50: padding-aware batching"
FULL = {"clients": [1, 4, 8, 16, 32, 48, 70], "warmup": 8.0, "duration": 30.0}
QUICK = {"clients": [1, 8, 32], "warmup": 4.0, "duration": 10.0}


def sample_images(count: int = 96, seed: int = 0) -> list[np.ndarray]:
    """Paddle's shapes: height and width each uniform in 224 ± 50, normalised-range values."""
    rng = np.random.default_rng(seed)
    sides = rng.integers(174, 275, size=(count, 2))
    return [rng.standard_normal((1, 3, h, w), dtype=np.float32) for h, w in sides]


def reduced_source(root: Path) -> Path:
    """The committed sources of resnet50 and its backbone only (a server that loads nothing else)."""
    (root / "profiles").mkdir(parents=True)
    for model in MODELS:
        (root / model).symlink_to(SOURCE / model)
    shutil.copy(SOURCE / "artifacts.json", root)
    spec = json.loads((SOURCE / "profiles" / "cpu.json").read_text())
    spec["models"] = {name: value for name, value in spec["models"].items() if name in MODELS}
    (root / "profiles" / "cpu.json").write_text(json.dumps(spec))
    return root


def build_variant(variant: str, root: Path) -> Path:
    repository = root / "repository"
    build("cpu", repository, source=reduced_source(root / "source"))
    path = repository / "resnet50" / "config.pbtxt"
    config = parse_config(path.read_text())
    config.parameters["merge_policy"].string_value = "equal_shapes" if variant == "triton" else variant
    config.input[0].allow_ragged_batch = variant != "triton"
    path.write_text(render_config(config))
    return repository


def counters(metrics_url: str) -> dict[str, float]:
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    return {f"{n}{{{l}}}": float(v) for n, l, v in re.findall(r'^(padded_batch_\w+)\{([^}]*)\} (\S+)$', text, re.M)}


async def snapshot(client, server: TritonServer) -> dict:
    stats = (await client.get_inference_statistics("resnet50_backbone", as_json=True))["model_stats"][0]
    own = psutil.Process().cpu_times()
    return {
        "time": time.perf_counter(),
        "server_cpu": cpu_seconds(server.process.pid),
        "client_cpu": own.user + own.system,
        "images": int(stats.get("inference_count", 0)),
        "runs": int(stats.get("execution_count", 0)),
        "compute_ns": sum(int(stats["inference_stats"][k].get("ns", 0)) for k in ("compute_input", "compute_infer", "compute_output")),
        **counters(server.options.metrics_url),
    }


def summarise(variant: str, clients: int, latencies: list[float], errors: int, start: dict, end: dict) -> dict:
    wall = end["time"] - start["time"]
    delta = {k: end.get(k, 0) - start.get(k, 0) for k in end}
    padding = delta.get('padded_batch_elements{kind="padding",model="resnet50"}', 0)
    valid = delta.get('padded_batch_elements{kind="valid",model="resnet50"}', 0)
    ms = np.array(latencies) * 1000 if latencies else np.array([np.nan])
    return {
        "variant": variant,
        "clients": clients,
        "requests": len(latencies),
        "errors": errors,
        "throughput": round(len(latencies) / wall, 2),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "padding_waste": round(padding / (padding + valid), 3) if padding + valid else 0.0,
        "images_per_run": round(delta["images"] / delta["runs"], 2) if delta["runs"] else 0.0,
        "mixed_runs": int(delta.get('padded_batch_runs{model="resnet50",shapes="mixed"}', 0)),
        "backbone_busy": round(delta["compute_ns"] / 1e9 / wall, 2),
        "server_cpu": round(delta["server_cpu"] / wall, 2),
        "client_cpu": round(delta["client_cpu"] / wall, 2),
    }


async def closed_loop(server: TritonServer, variant: str, clients: int, images, warmup: float, duration: float) -> dict:
    """`clients` loops, each sending its next image as soon as its previous answer arrived."""
    client = aioclient.InferenceServerClient(server.options.grpc_url)
    begin = time.perf_counter()
    measure_from, stop_at = begin + warmup, begin + warmup + duration
    latencies: list[float] = []
    errors = 0

    async def loop(k: int) -> None:
        nonlocal errors
        index = k
        while time.perf_counter() < stop_at:
            image = images[index % len(images)]
            index += clients
            request = aioclient.InferInput("INPUT", list(image.shape), "FP32")
            request.set_data_from_numpy(image)
            sent = time.perf_counter()
            try:
                await client.infer("resnet50", [request])
            except Exception:  # counted and reported; a benchmark with errors is not a result
                errors += 1
                continue
            done = time.perf_counter()
            if measure_from <= done <= stop_at:
                latencies.append(done - sent)

    async def window() -> tuple[dict, dict]:
        await asyncio.sleep(warmup)
        first = await snapshot(client, server)
        await asyncio.sleep(duration)
        return first, await snapshot(client, server)

    (start, end), *_ = await asyncio.gather(window(), *(loop(k) for k in range(clients)))
    await client.close()
    return summarise(variant, clients, latencies, errors, start, end)


def run(variants, clients: list[int], warmup: float, duration: float, work: Path) -> list[dict]:
    images = sample_images()
    rows = []
    for variant in variants:
        repository = build_variant(variant, work / variant)
        with TritonServer(ServerOptions.on_free_ports(repository), log_path=work / variant / "server.log") as server:
            for count in clients:
                row = asyncio.run(closed_loop(server, variant, count, images, warmup, duration))
                rows.append(row)
                print(f"  {variant:<7} {count:>3} clients: {row['throughput']:6.2f} img/s  p50 {row['p50_ms']:7.0f} ms  "
                      f"p99 {row['p99_ms']:7.0f} ms  waste {row['padding_waste']:.0%}  {row['images_per_run']:.1f} img/run  "
                      f"errors {row['errors']}", flush=True)
    return rows


def ratio_table(rows: list[dict]) -> dict[tuple[str, int], float]:
    base = {r["clients"]: r["throughput"] for r in rows if r["variant"] == "none"}
    return {(r["variant"], r["clients"]): r["throughput"] / base[r["clients"]] for r in rows if base.get(r["clients"])}


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for variant in VARIANTS:
        mine = [r for r in rows if r["variant"] == variant]
        if mine:
            left.plot([r["clients"] for r in mine], [r["throughput"] for r in mine], marker="o", label=variant)
            right.plot([r["clients"] for r in mine], [r["p99_ms"] / 1000 for r in mine], marker="o", label=variant)
    left.set(xlabel="clients", ylabel="images / s", title="Throughput, shapes (3, 224±50, 224±50)")
    right.set(xlabel="clients", ylabel="p99 latency (s)", title="p99 latency")
    left.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def markdown(rows: list[dict], meta: dict, plot_path: Path | None) -> str:
    ratios = ratio_table(rows)
    clients = sorted({r["clients"] for r in rows})
    lines = [
        HEADING, "",
        f"Command: `{meta['command']}`  ",
        f"Machine: {meta['machine']}; load average before the run {meta['load_before']}, after {meta['load_after']}.  ",
        f"Layout (CPU profile): {meta['layout']}.", "",
        "Throughput relative to no batching (same layout, same images):", "",
        "| variant | " + " | ".join(f"{c} clients" for c in clients) + " |",
        "| --- |" + " --- |" * len(clients),
    ]
    for variant in VARIANTS:
        cells = [f"{ratios[(variant, c)]:.2f}x" if (variant, c) in ratios else "-" for c in clients]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    lines += [
        "", "| variant | clients | images/s | p50 ms | p99 ms | padding waste | images/run | mixed runs | backbone busy | server CPU | client CPU | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['clients']} | {r['throughput']:.2f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | "
            f"{r['padding_waste']:.1%} | {r['images_per_run']:.2f} | {r['mixed_runs']} | {r['backbone_busy']:.0%} | "
            f"{r['server_cpu']:.2f} | {r['client_cpu']:.2f} | {r['errors']} |"
        )
    lines.append("")
    if plot_path is not None:
        lines += [f"![ResNet50 padding-aware batching]({plot_path.name})", ""]
    return "\n".join(lines)


def write_section(report: Path, section: str, keep_text: str = "") -> None:
    """Replace this tool's section (up to the next "## " heading) or append it; the rest is kept.
    `keep_text`: the person-written reading of the numbers, placed under the generated tables."""
    text = report.read_text() if report.is_file() else "# Performance results\n\n"
    body = section + (keep_text.strip() + "\n" if keep_text.strip() else "")
    pattern = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: body + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + body
    report.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"clients {QUICK['clients']}, {QUICK['duration']:.0f} s windows")
    parser.add_argument("--clients", type=int, nargs="+", help="client counts (default: 1-70, or the quick ones)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--duration", type=float, help="measured seconds per point")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "perf" / "resnet_padding")
    parser.add_argument("--report", type=Path, help="Markdown file whose ResNet50 section to (re)write")
    parser.add_argument("--analysis", type=Path, default=Path(__file__).with_name("resnet_padding.md"),
                        help="person-written reading of the numbers, appended to the section when present")
    args = parser.parse_args(argv)
    plan = dict(QUICK if args.quick else FULL)
    plan["clients"] = args.clients or plan["clients"]
    plan["duration"] = args.duration or plan["duration"]
    args.out.mkdir(parents=True, exist_ok=True)
    profile = json.loads((SOURCE / "profiles" / "cpu.json").read_text())["models"]
    meta = {
        "command": "python -m perf.resnet_padding " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "layout": ", ".join(f"{m} {json.dumps(profile.get(m, {}))}" for m in MODELS),
        "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        **plan,
    }
    with tempfile.TemporaryDirectory(prefix="resnet-padding-") as work:
        rows = run(args.variants, plan["clients"], plan["warmup"], plan["duration"], Path(work))
    meta["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    with (args.out / "results.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot_path = (args.report.parent if args.report else args.out) / "resnet_padding.png"
    section = markdown(rows, meta, plot_path if plot(rows, plot_path) else None)
    (args.out / "REPORT.md").write_text(section)
    if args.report:
        analysis = args.analysis.read_text() if args.analysis.is_file() else ""
        write_section(args.report, section, analysis)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
