"""A GPU run's REPORT.md and plots, from its results alone (rewritten after every phase, so that a run cut
short still leaves what it measured)."""

from __future__ import annotations

from pathlib import Path

from perf.engine.plots import plt, save, versus_clients
from perf.engine.tables import table, verdict_lines
from perf.engine.workload import Verdict
from perf.gpu.verdicts import CHUNKS, IMAGES, instances_needed
from perf.workloads.radar import TIME_HEADERS, per_text

PLOTS = {"radar": "radar.png", "instances": "radar_instances.png", "resnet": "resnet.png"}


def gpu_cells(row: dict) -> list[str]:
    gpu = row.get("gpu", {})
    if "util_mean_pct" not in gpu:
        return ["-", "-"]
    return [f"{gpu['util_mean_pct']:.0f}", f"{gpu['memory_max_mib']:.0f}"]


def load_cells(row: dict, key: str) -> list[str]:
    return [
        row["concurrency"],
        f"{row[key]:.1f}",
        f"{row['p50_ms']:.0f}",
        f"{row['p99_ms']:.0f}",
        *gpu_cells(row),
        row["error"] or "0",
    ]


def radar_series(results: dict) -> dict[str, list[dict]]:
    radar = results["radar"]
    series: dict[str, list[dict]] = {}
    for row in radar["kit"]:
        series.setdefault(f"kit, {row['radar_instances']} radar instances", []).append(row)
    if radar["flask"]:
        series["Flask per request"] = radar["flask"]
    if radar["batcher"]:
        series[f"asyncio batcher ({radar['batcher'][0]['setting']})"] = radar["batcher"]
    return series


def header(results: dict) -> list[str]:
    env, prep = results["environment"], results.get("prepare", {})
    gpu = env["gpu"]
    where = (
        f"{gpu['name']} (driver {gpu['driver']}, {gpu['memory_mib']} MiB)" if "name" in gpu else f"no GPU ({gpu['unavailable']})"
    )
    placement = results["placement"]
    lines = [
        "# GPU measurement (issue 13): the kit's embedded Triton against the field reports' designs\n",
    ]
    if results["mode"] == "quick":
        lines.append(
            "**Dry run on the CPU with tiny models in FP32: it exercises the GPU run's code path end to end; its numbers "
            "say nothing about a GPU.**\n"
        )
    lines += [
        f"Command: `{results['command']}`; started {results['started']}, {results.get('minutes', '-')} min, commit "
        f"`{results['commit']}`, mode `{results['mode']}`.\n",
        f"- Device: {where}; networks on `{placement['device']}` in {placement['dtype'].upper()}; {env['cores']} cores; "
        f"Python {env['python']}; torch {prep.get('environment', {}).get('torch', '-')}, transformers "
        f"{prep.get('environment', {}).get('transformers', '-')}, numpy {env['numpy']} (the Python-backend stubs: numpy "
        f"{env['stub_numpy']}, as tritonserver 2.51's stub reads numpy 2 arrays wrongly).",
        f"- tritonserver: `{env['triton_dist']}` (the GPU build from the nvidia-pytriton wheel); Triton GPU metrics seen: "
        f"{', '.join(results['radar'].get('triton_gpu_metrics') or []) or 'none'}.",
        f"- OCR: onnxruntime {env['ocr']['onnxruntime']} with providers {env['ocr']['providers']}: {env['ocr']['finding']}",
        "",
    ]
    return lines


def radar_section(results: dict) -> list[str]:
    prep = results.get("prepare", {}).get("radar")
    if not prep:
        return ["## RADAR\n", "Not measured: the models were not prepared.\n"]
    rows = []
    for label, series in radar_series(results).items():
        rows += [[label, *load_cells(r, CHUNKS)] for r in series]
    limit = prep["limit"]["best"]
    lines = [
        "## RADAR: chunks/s at each load\n",
        f"RADAR stand-in of export.standins' `{prep['size']}` shape ({prep['parameters'] / 1e6:.0f}M parameters, random "
        "weights; `large` is RoBERTa-large's) on the kit's PyTorch "
        f"runner (eager, SDPA attention, no CUDA graphs) for every design; {results['texts']} texts of 100-800 characters, "
        f"{prep['chunks_per_text']:.2f} chunks per text, padded to the kit's buckets {prep['buckets']}. Closed-loop "
        "clients: gRPC to the kit, HTTP/JSON to the baselines. GPU utilisation: mean over the window; GPU MiB: peak of "
        "the target's processes.\n",
        *table(["design", "clients", "chunks/s", "p50 ms", "p99 ms", "GPU util %", "GPU MiB", "failed"], rows),
        f"\nLimit (offline, the same runner over the same padded chunks): **{limit['chunks_per_s']:.1f} chunks/s at batch "
        f"{limit['batch']}**.\n",
        *table(
            ["batch", "chunks/s", "GPU util %"],
            [[r["batch"], f"{r['chunks_per_s']:.1f}", gpu_cells(r)[0]] for r in prep["limit"]["layouts"]],
        ),
        "",
    ]
    return lines + instances_section(results) + batcher_section(results) + accuracy_section(results) + time_section(results)


def instances_section(results: dict) -> list[str]:
    kit = results["radar"]["kit"]
    counts = sorted({r["radar_instances"] for r in kit})
    if not counts:
        return []
    clients = sorted({r["concurrency"] for r in kit})
    by = {(r["radar_instances"], r["concurrency"]): r for r in kit}
    cell = lambda n, c: (  # noqa: E731
        f"{by[(n, c)][CHUNKS]:.1f} ({gpu_cells(by[(n, c)])[0]}%)" if (n, c) in by and not by[(n, c)]["error"] else "-"
    )
    lines = [
        "## How many `radar` instances the GPU needs\n",
        "chunks/s (mean GPU utilisation) per `radar` entry instance count (one kit server each) and load.\n",
        *table(["radar instances", *[f"{c} clients" for c in clients]], [[n, *[cell(n, c) for c in clients]] for n in counts]),
        "",
    ]
    for c in clients[-2:]:
        needed = instances_needed(kit, c)
        if needed is None:
            continue
        verdict = (
            f"more instances no longer help: the Python side stops being the bottleneck at {needed['instances']}"
            if needed["saturated"]
            else f"the most instances measured ({needed['instances']}) were still the fastest: more may help"
        )
        lines.append(f"- At {c} clients: {verdict} (within {needed['within']:.0%} of the best layout).")
    return [*lines, ""]


def batcher_section(results: dict) -> list[str]:
    probes = results["radar"].get("batcher_probes") or []
    if not probes:
        return []
    return [
        f"## The asyncio batcher's settings (probed at {probes[0]['concurrency']} clients; the best is swept above)\n",
        *table(
            ["BATCH_SIZE_MAX / BATCH_TIMEOUT", "chunks/s", "p99 ms", "GPU util %", "failed"],
            [[r["setting"], f"{r[CHUNKS]:.1f}", f"{r['p99_ms']:.0f}", gpu_cells(r)[0], r["error"] or "0"] for r in probes],
        ),
        "",
    ]


def accuracy_section(results: dict) -> list[str]:
    radar, resnet = results["radar"].get("accuracy"), results["resnet"].get("accuracy")
    if not radar and not resnet:
        return []
    dtype = results["placement"]["dtype"].upper()
    lines = [f"## Served {dtype} results against the FP32 reference (the CPU server's results, up to the export's 1e-5)\n"]
    if radar:
        lines.append(
            f"- RADAR, {radar['texts']} texts ({radar['chunks']} chunks): max abs difference "
            f"{radar['max_abs_chunk_score_diff']:.2e} on a chunk's AI probability, "
            f"{radar['max_abs_score_diff']:.2e} on a text's score."
        )
    if resnet:
        lines.append(
            f"- ResNet-50, {resnet['images']} images: max abs difference {resnet['max_abs_prob_diff']:.2e} on a class "
            f"probability; top-1 agreement {resnet['top1_agreement']:.0%}."
        )
    return [*lines, ""]


def time_section(results: dict) -> list[str]:
    rows = [[r["radar_instances"], r["load"], *per_text(r)] for r in results["radar"]["kit"] if not r["error"]]
    if not rows:
        return []
    return [
        "## Where the kit's time goes (Triton's counters, per text request)\n",
        *table(["radar instances", "load", *TIME_HEADERS], rows),
        "",
    ]


def resnet_section(results: dict) -> list[str]:
    rows, prep = results["resnet"]["rows"], results.get("prepare", {}).get("resnet")
    if not rows or not prep:
        return ["## ResNet-50\n", "Not measured.\n"] if not rows else []
    none = {r["concurrency"]: r[IMAGES] for r in rows if r["setting"] == "none" and not r["error"]}
    cost = prep["cost"]["model"]
    body = [
        [
            r["setting"],
            *load_cells(r, IMAGES)[:2],
            f"{r[IMAGES] / none[r['concurrency']]:.2f}" if none.get(r["concurrency"]) else "-",
            *load_cells(r, IMAGES)[2:],
            f"{r.get('padding_waste', 0):.1%}",
            f"{r.get('images_per_run', 0):.2f}",
            f"{r.get('backbone_busy', 0):.0%}",
        ]
        for r in rows
    ]
    return [
        "## ResNet-50 on images of (3, 224±50, 224±50)\n",
        f"ResNet stand-in of export.resnet's `{prep['size']}` shape ({prep['parameters'] / 1e6:.1f}M parameters, random "
        "weights) on the kit's PyTorch runner; `resnet50`'s "
        "batching variants, each on its own server: none (every request alone), triton (equal shapes only), paddle "
        "(Paddle Serving's rule), cost (the kit's rule with the cost model measured on this device).\n",
        *table(
            [
                "variant",
                "clients",
                "images/s",
                "x none",
                "p50 ms",
                "p99 ms",
                "GPU util %",
                "GPU MiB",
                "failed",
                "padding",
                "images/run",
                "backbone busy",
            ],
            body,
        ),
        "",
        "Cost model measured here (per image size in elements: fixed ms per run + ms per image): "
        + "; ".join(
            f"{n}: {1000 * f:.2f} + {1000 * p:.3f} x batch" for n, f, p in zip(cost["elements"], cost["fixed"], cost["per_item"])
        )
        + ".\n",
    ]


def plan_section(results: dict) -> list[str]:
    rows = [[name, f"{est:.0f}", f"{results['phase_seconds'].get(name, 0):.0f}"] for name, est in results["plan"].items()]
    lines = ["## Plan, time and what was left out\n", *table(["phase", "estimate s", "took s"], rows), ""]
    lines += [f"- skipped: {s['what']} ({s['why']})" for s in results["skipped"]] or ["- nothing skipped"]
    lines += [f"- error: {e['what']}: {e['error']} (details in results.json)" for e in results["errors"]]
    return [*lines, ""]


def radar_plot(results: dict, path: Path) -> None:
    series = radar_series(results)
    limit = results.get("prepare", {}).get("radar", {}).get("limit", {}).get("best")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for label, rows in series.items():
        left.plot([r["concurrency"] for r in rows], [r[CHUNKS] for r in rows], marker="o", label=label)
        right.plot([r["concurrency"] for r in rows], [r["p99_ms"] / 1000 for r in rows], marker="o", label=label)
    if limit:
        left.axhline(limit["chunks_per_s"], color="grey", linestyle="--", label=f"limit (batch {limit['batch']})")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
    left.set(xlabel="clients", ylabel="chunks/s", title="RADAR throughput")
    right.set(xlabel="clients", ylabel="p99 latency (s)", title="p99 latency")
    left.legend(fontsize=7)
    save(fig, path)


def instances_plot(results: dict, path: Path) -> None:
    kit = results["radar"]["kit"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for clients in sorted({r["concurrency"] for r in kit}):
        rows = sorted((r for r in kit if r["concurrency"] == clients and not r["error"]), key=lambda r: r["radar_instances"])
        ax.plot([r["radar_instances"] for r in rows], [r[CHUNKS] for r in rows], marker="o", label=f"{clients} clients")
    ax.set(xlabel="radar entry instances", ylabel="chunks/s", title="Kit throughput by radar instances")
    ax.legend(fontsize=7)
    save(fig, path)


def write_plots(results: dict, out: Path) -> list[str]:
    written = []
    if results["radar"]["kit"] or results["radar"]["flask"]:
        radar_plot(results, out / PLOTS["radar"])
        written.append(PLOTS["radar"])
    if len({r["radar_instances"] for r in results["radar"]["kit"]}) > 1:
        instances_plot(results, out / PLOTS["instances"])
        written.append(PLOTS["instances"])
    if results["resnet"]["rows"]:
        series: dict[str, list[dict]] = {}
        for row in results["resnet"]["rows"]:
            series.setdefault(row["setting"], []).append(row)
        versus_clients(series, IMAGES, "images/s", "ResNet-50, mixed shapes", out / PLOTS["resnet"])
        written.append(PLOTS["resnet"])
    return written


def write_report(results: dict, verdicts: list[Verdict], out: Path) -> Path:
    plots = write_plots(results, out)
    lines = [
        *header(results),
        "## Targets\n",
        *(verdict_lines(verdicts) or ["- none judged yet"]),
        "",
        *radar_section(results),
        *resnet_section(results),
        *plan_section(results),
        *[f"![{name}]({name})" for name in plots],
        "",
    ]
    path = out / "REPORT.md"
    path.write_text("\n".join(lines))
    return path
