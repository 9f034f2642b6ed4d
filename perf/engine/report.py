"""A workload's REPORT.md and plots from its results.json, and the index perf/RESULTS.md over all of them.

The engine writes what every workload shares: how the run was measured, the results per input set,
the settings probed and the memory of each target. The workload adds its targets and its own
sections (perf.engine.workload). A person's reading of the numbers, `analysis.md` beside
results.json, is included as it is. Each report is one file of its own: no writer edits another's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from kit.control.configs import REPO_ROOT
from perf.engine import plots
from perf.engine.tables import graphs, limit_of, pct, per_cpu, ratio, sec, table, target_name, verdict_lines
from perf.engine.workload import Workload

RESULTS = REPO_ROOT / "perf" / "results"
INDEX = REPO_ROOT / "perf" / "RESULTS.md"
ANALYSIS = "analysis.md"


def rate_headers(w: Workload) -> list[str]:
    return [f"{w.request}s/s", f"{w.item}s/s"] if w.request != w.item else [f"{w.item}s/s"]


def rate_cells(row: dict, w: Workload) -> list[str]:
    return [f"{row['throughput']:.2f}", f"{row[w.key]:.2f}"] if w.request != w.item else [f"{row[w.key]:.2f}"]


def how_measured(results: dict, w: Workload, out_dir: Path) -> list[str]:
    spec, m = results["spec"], results["machine"]
    host = f"{m['cpu']}, {m['cores']} cores"
    if "memory_gib" in m:  # a run from before the engine recorded only these two
        host += f", {m['memory_gib']} GiB, {m['os']}, Python {m['python']}"
    averages = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    load = f"load average {averages(m['load_average_at_start'])} at the start"
    if results.get("load_average_at_end"):
        load += f" and {averages(results['load_average_at_end'])} at the end"
    facts = {"commit": "commit {}", "started": "started {}", "minutes": "took {} min"}
    run = "".join(f", {text.format(results[key])}" for key, text in facts.items() if results.get(key))
    source = os.path.relpath(out_dir.resolve() / "results.json", REPO_ROOT)
    if "window" in spec:
        generator = (
            "a closed loop in the tool's process (perf.engine.load: asyncio gRPC clients, each sending its next request "
            f"when its previous answer arrived), {spec['window']['warmup_s']:g} s of warm-up then "
            f"{spec['window']['duration_s']:g} s measured per point"
        )
    else:
        r = spec["requests"]
        generator = (
            "perf_analyzer 2.51 for every target, `--async`, a fixed number of requests per point "
            f"(per client {r['per_client']}, at least {r['min']}, at most {r['max']})"
        )
    s = [
        "## How this was measured\n",
        f"- Machine: {host}; {load} (the cores are shared: ratios, measured side by side, are what count).",
        f"- Command: `{results['command']}` (spec `{Path(spec['path']).name}`; raw results `{source}`){run}.",
        f"- Model: `{results['model']}`: {spec.get('model_note', w.model_note)}.",
        f"- Inputs: {w.inputs_line(spec)}.",
        f"- Load generator: {generator}; {w.load_note}",
    ]
    if "graphs" in spec:
        files = ", ".join(f"{name} `{graph}`" for name, graph in spec["graphs"].items())
        s.append(
            f"- Graphs: the limit and every target ran on each of these files of the model folder in turn ({files}); "
            "each served figure is set against the limit of its own graph."
        )
    if "probe" in spec:
        s.append(
            f"- Each family's settings were probed at {spec['probe']['concurrency']} clients "
            f"({spec['probe']['requests']} requests); the best one (highest throughput) is swept below."
        )
    else:
        s.append("- Every setting was measured at every load, each setting on a fresh server.")
    if results.get("note"):
        s.append(f"- Note: {results['note']}.")
    return s + [""]


def results_plot(results: dict, w: Workload, out_dir: Path) -> list[str]:
    """With probes, each family's best setting as throughput against p99; without, every setting against clients."""
    sweep_input = results["spec"]["sweep"]["input"]
    ok = [r for r in results["sweeps"] if r["input"] == sweep_input and r["concurrency"] and not r["error"]]
    if "probe" in results["spec"]:
        plot, curves = f"{w.name}_throughput_vs_p99.png", {}
        for r in ok:  # a run over graphs sweeps one setting per family and graph: its name says which
            name = target_name(w, r) if "graph" in r else f"{w.family_title(r['family'])} ({r['setting']})"
            curves.setdefault(name, []).append(r)
        limits = {
            f"limit {g}" if g else "limit (offline, best layout)": lim["best"][w.key]
            for g in graphs(results)
            if (lim := limit_of(results, g))
        }
        title = f"{w.title} throughput vs p99 latency ({sweep_input} {w.request}s)"
        plots.throughput_vs_p99(curves, w.key, limits, f"{w.item}s / s", title, out_dir / plot)
        heading = "## Results at each family's best setting\n"
    else:
        plot, lines = f"{w.name}_vs_clients.png", {}
        for r in ok:
            lines.setdefault(r["setting"], []).append(r)
        plots.versus_clients(lines, w.key, f"{w.item}s / s", f"{w.title} throughput ({sweep_input} {w.request}s)", out_dir / plot)
        heading = "## Results at every setting\n"
    return [heading, f"![results]({plot})\n"]


def results_table(results: dict, w: Workload, input_name: str, graph: str | None) -> list[str]:
    """Every swept point of one input set (and graph), with the kit's throughput over each target's at the same load."""
    cores, lim = results["machine"]["cores"], limit_of(results, graph)
    several = len({r["family"] for r in results["sweeps"]}) > 1
    rows = [r for r in results["sweeps"] if r["input"] == input_name and r.get("graph") == graph]
    kit = {r["load"]: r for r in rows if r["family"] == "kit"}
    headers = [
        "target",
        "setting",
        "load",
        *rate_headers(w),
        "p50 s",
        "p99 s",
        *(["served / limit"] if lim else []),
        *(["kit / target"] if several else []),
        "server CPU",
        f"{w.item}s / server CPU-s",
        "client CPU",
        "failed",
        *(c.header for c in w.columns),
    ]
    cells = [
        [
            w.family_title(r["family"]),
            r["setting"],
            r["load"],
            *rate_cells(r, w),
            sec(r["p50_ms"]),
            sec(r["p99_ms"]),
            *([f"{r[w.key] / lim['best'][w.key]:.2f}"] if lim else []),
            *([ratio(kit.get(r["load"], {}).get("throughput"), r["throughput"])] if several else []),
            pct(r["server_cpu_s"], r["wall_s"], cores),
            per_cpu(r, w.key),
            pct(r["client_cpu_s"], r["wall_s"], cores),
            r["error"] or "0",
            *(c.cell(r) for c in w.columns),
        ]
        for r in rows
    ]
    on = f", graph {graph} (`{results['spec']['graphs'][graph]}`)" if graph else ""
    return [f"**{input_name} {w.request}s{on}**\n", *table(headers, cells), ""] if rows else []


def probes_section(results: dict, w: Workload, out_dir: Path) -> list[str]:
    cores = results["machine"]["cores"]
    groups: dict[str, list[dict]] = {}
    for r in results["probes"]:
        if not r["error"]:
            groups.setdefault(target_name(w, r), []).append(r)
    plot = f"{w.name}_settings.png"
    plots.settings_scatter(
        groups,
        w.key,
        f"{w.item}s / s",
        f"{w.title}: settings probed at {results['spec']['probe']['concurrency']} clients",
        out_dir / plot,
    )
    rows = [
        [
            target_name(w, r),
            r["setting"],
            r["workers"],
            *rate_cells(r, w),
            sec(r["p99_ms"]),
            r["peak_rss_mb"],
            pct(r["server_cpu_s"], r["wall_s"], cores),
            per_cpu(r, w.key),
            pct(r["client_cpu_s"], r["wall_s"], cores),
            r["error"] or "0",
        ]
        for r in results["probes"]
    ]
    headers = [
        "target",
        "setting",
        "workers / instances",
        *rate_headers(w),
        "p99 s",
        "peak RSS MiB",
        "server CPU",
        f"{w.item}s / server CPU-s",
        "client CPU",
        "failed",
    ]
    return ["## Settings probed\n", f"![settings]({plot})\n", *table(headers, rows), ""]


def memory_section(results: dict, w: Workload, out_dir: Path) -> list[str]:
    """Peak RSS (MiB) per family (and graph) and worker/instance count, the largest seen at that count."""
    by_workers: dict[str, dict[int, int]] = {}
    for r in results["probes"] + results["sweeps"]:
        cell = by_workers.setdefault(target_name(w, r), {})
        cell[r["workers"]] = max(cell.get(r["workers"], 0), r["peak_rss_mb"])
    plot = f"{w.name}_memory.png"
    plots.memory_bars(by_workers, f"{w.title}: memory of each target", out_dir / plot)
    counts = sorted({n for cell in by_workers.values() for n in cell})
    s = [
        "## Memory\n",
        f"![memory]({plot})\n",
        f"Peak resident memory of the whole process tree (server, workers, Python stubs) during a run, MiB. {w.workers_note}\n",
        *table(
            ["target", *[f"{n} worker(s) / instance(s)" for n in counts]],
            [[family, *[cell.get(n, "-") for n in counts]] for family, cell in by_workers.items()],
        ),
    ]
    kit_rows = [r for r in results["sweeps"] if r["family"] == "kit"]
    if kit_rows and "limits" not in results:  # a run over graphs has a layout per graph: the table's rows
        s.append(f"\nThe kit at its chosen layout ({kit_rows[0]['setting']}): {max(r['peak_rss_mb'] for r in kit_rows)} MiB.")
    return s + [""]


def render(results: dict, w: Workload, out_dir: Path) -> str:
    s = [
        f"# {w.title} performance\n",
        "Generated by `python -m perf` from results.json in this folder; do not edit by hand. "
        f"Every workload's report: [perf/RESULTS.md]({os.path.relpath(INDEX, out_dir.resolve())}).\n",
        *how_measured(results, w, out_dir),
        *results_plot(results, w, out_dir),
        *(line for i in results["spec"]["inputs"] for g in graphs(results) for line in results_table(results, w, i["name"], g)),
    ]
    verdicts = w.verdicts(results)
    if verdicts:
        s += ["## Targets\n", *verdict_lines(verdicts), ""]
    s += w.sections(results, out_dir)
    if results["probes"]:
        s += probes_section(results, w, out_dir)
    if all("peak_rss_mb" in r for r in results["probes"] + results["sweeps"]):
        s += memory_section(results, w, out_dir)
    analysis = out_dir / ANALYSIS
    if analysis.is_file():
        s += ["## Analysis\n", analysis.read_text().strip(), ""]
    return "\n".join(s)


def write_report(results: dict, w: Workload, out_dir: Path) -> Path:
    path = out_dir / "REPORT.md"
    path.write_text(render(results, w, out_dir))
    return path


def index_row(w: Workload, results: dict, report: Path, index: Path) -> list[str]:
    verdicts = w.verdicts(results)
    met = f"{sum(v.met for v in verdicts)} of {len(verdicts)}" if verdicts else "-"
    run = f"`{results['command']}`" + (f", {results['started']}" if results.get("started") else "")
    link = os.path.relpath(report.resolve(), index.resolve().parent)
    return [w.title, f"[{link}]({link})", run, w.headline(results), met]


def write_index(reports: Iterable[tuple[Workload, dict, Path]], index: Path = INDEX) -> Path:
    """One line per workload (its report, its run, its headline, its targets), as `reports` lists them."""
    rows = [index_row(w, results, report, index) for w, results, report in reports]
    index.write_text(
        "\n".join(
            [
                "# Performance results\n",
                "One report per workload, each generated by `python -m perf` from its run's results.json under perf/results/ "
                "(docs/PERFORMANCE.md: how each benchmark runs and what it measures). Do not edit by hand.\n",
                *table(["workload", "report", "run", "headline", "targets met"], rows),
                "",
                "Also committed: FP16 and batch size on an H100 in PyTorch (export/gpu_levers.py), raw output in "
                "[results/gpu/](results/gpu/h100_levers.json); OCR's detector sizing policies on browser-rendered pages "
                "(`make perf-ocr-sizing`) in [results/ocr/sizing.json](results/ocr/sizing.json), and the served side-by-side "
                "of the committed sizing and RapidOCR's (`make perf-ocr-rendered`) in "
                "[results/ocr/rendered/REPORT.md](results/ocr/rendered/REPORT.md); the reliability runs "
                "(`make soak`, `make peak`, `make fuzz`) in "
                "[RELIABILITY.md](RELIABILITY.md); RADAR's graphs timed in turns (`python -m perf.probes.radar_graphs`) in "
                "[results/radar-precision/graphs_interleaved.json](results/radar-precision/graphs_interleaved.json), the kit "
                "and the limit in turns (`python -m perf.probes.kit_vs_limit`) in "
                "[results/radar-precision/kit_vs_limit_fused.json](results/radar-precision/kit_vs_limit_fused.json) (more "
                "rounds at 16 clients: [kit_vs_limit_fused_16.json](results/radar-precision/kit_vs_limit_fused_16.json), "
                "[kit_vs_limit_fused_16_long.json](results/radar-precision/kit_vs_limit_fused_16_long.json); against 16 `radar` "
                "instances in the same turns: [kit_vs_limit_fused_16_entry.json](results/radar-precision/"
                "kit_vs_limit_fused_16_entry.json), [kit_vs_limit_fused_16_variants.json](results/radar-precision/"
                "kit_vs_limit_fused_16_variants.json); the server's CPU split by process: [kit_vs_limit_fused_roles.json]"
                "(results/radar-precision/kit_vs_limit_fused_roles.json)), the classifier's occupancy from Triton's traces "
                "(`python -m perf.probes.occupancy`) in [results/radar-precision/occupancy_entry.json]"
                "(results/radar-precision/occupancy_entry.json), what ONNX Runtime's own fusions and the fused export run "
                "and are worth (`python -m perf.probes.radar_graphs --levels basic all --ops`) in "
                "[results/radar-precision/online_fusion.json](results/radar-precision/online_fusion.json) and the "
                "classifier layout on the fused graph (`--spec precision-layout`) in "
                "[results/radar-precision/layout/](results/radar-precision/layout/REPORT.md); INT8 of the OCR models and "
                "ResNet-50 (`make perf-int8-graphs`) in [results/int8/graphs.json](results/int8/graphs.json).\n",
            ]
        )
    )
    return index
