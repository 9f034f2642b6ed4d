"""A workload's REPORT.md and plots from its results.json, and the index perf/RESULTS.md over all of them.

The engine writes what every workload shares: how the run was measured, the results per input set
(with a run in `rounds`, each point's median over the rounds and their spread), the targets judged
from the spec's goals, the settings probed, the memory of each target, the accuracy check, and what a
run skipped or failed. The workload adds its own sections (perf.engine.workload). A person's reading of
the numbers, `analysis.md` beside results.json, is included as it is. Each report is one file of its
own: no writer edits another's. The index lists every workload's committed run, then the other
committed results from perf/results/extras.json (title, command, file): data, not prose in code.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable
from pathlib import Path

from kit.control.configs import REPO_ROOT
from perf.engine import plots
from perf.engine.tables import (
    pct,
    per_cpu,
    ratio,
    runner_section,
    sec,
    table,
    time_section,
    verdict_lines,
)
from perf.engine.verdicts import judge
from perf.engine.workload import Workload

RESULTS = REPO_ROOT / "perf" / "results"
INDEX = REPO_ROOT / "perf" / "RESULTS.md"
EXTRAS = RESULTS / "extras.json"
ANALYSIS = "analysis.md"
# The figures of a point that a run in rounds reports as medians over its rounds.
MEDIANS = ("throughput", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "avg_ms", "server_cpu_s", "client_cpu_s", "wall_s")


def collapsed(results: dict, w: Workload) -> list[dict]:
    """The swept rows, one per point: in a run with rounds, each point's medians over its rounds, with the number of
    rounds and the spread of its throughput (min, max); otherwise the rows as measured."""
    if "rounds" not in results["spec"]:
        return results["sweeps"]
    points: dict[tuple, list[dict]] = {}
    for r in results["sweeps"]:
        points.setdefault((r["family"], r["setting"], r["input"], r["load"]), []).append(r)
    out = []
    for rows in points.values():
        row = dict(rows[-1])
        for key in (*MEDIANS, w.key):
            if all(key in r for r in rows):
                row[key] = statistics.median(r[key] for r in rows)
        if "peak_rss_mb" in row:
            row["peak_rss_mb"] = max(r["peak_rss_mb"] for r in rows)
        row["error"] = "; ".join(r["error"] for r in rows if r["error"]) or None
        row["rounds"], row["spread"] = len(rows), (min(r[w.key] for r in rows), max(r[w.key] for r in rows))
        out.append(row)
    return out


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
    if m.get("gpu", {}).get("name"):
        g = m["gpu"]
        host += f"; GPU {g['name']} (driver {g['driver']}, {g['memory_mib']} MiB)"
    if "window" in spec:
        generator = (
            "a closed loop in the tool's process (perf.engine.load: asyncio clients, each sending its next request when "
            "its previous answer arrived; gRPC to Triton, JSON POSTs to the door and the baselines), "
            f"{spec['window']['warmup_s']:g} s of warm-up then {spec['window']['duration_s']:g} s measured per point"
        )
    else:
        r = spec["requests"]
        generator = (
            "perf_analyzer 2.51 for every target (Triton through its gRPC client, the door and the baselines as JSON POSTs "
            "of its `openai` service kind), `--async`, a fixed number of requests per point "
            f"(per client {r['per_client']}, at least {r['min']}, at most {r['max']})"
        )
    command = f"`{results['command']}`"
    if results.get("rerun"):  # a run made with a command line that has since changed: what reproduces it today
        command = f"`{results['rerun']}` (run as `{results['command']}`, the command line of the time)"
    s = [
        "## How this was measured\n",
        f"- Machine: {host}; {load} (the cores are shared: ratios, measured side by side, are what count).",
        f"- Command: {command} (spec `{Path(spec['path']).name}`; raw results `{source}`){run}.",
        f"- Model: `{results['model']}`: {spec.get('model_note', w.model_note)}.",
        f"- Inputs: {w.inputs_line(spec)}.",
        f"- Load generator: {generator}; {w.load_note}",
    ]
    if spec.get("profile", "cpu") != "cpu":
        placement = ", ".join(f"{k} {v}" for k, v in spec.get("placement", {}).items())
        at = f", PyTorch-runner models at {placement}" if placement else ""
        s.append(f"- Kit: the `{spec['profile']}` profile{at}.")
    if "probe" in spec:
        s.append(
            f"- Each family's settings were probed at {spec['probe']['concurrency']} clients"
            + (f" ({spec['probe']['requests']} requests)" if "requests" in spec["probe"] else "")
            + "; the best one (highest throughput) is swept below."
        )
    elif "rounds" in spec:
        s.append(
            f"- In turns: every target ran at once, kept running, and the loads went round {spec['rounds']} time(s) in an "
            "order that rotated each round" + (", the limit first in each" if "limit" in spec else "") + "; each figure below "
            "is a median over the rounds, each ratio judged the median of the rounds' own ratios."
        )
    else:
        s.append("- Every setting was measured at every load, each setting on a fresh server.")
    if spec.get("gpu"):
        s.append("- GPU: utilisation of the device and GPU memory of the target's processes, sampled by NVML over each window.")
    if results.get("note"):
        s.append(f"- Note: {results['note']}.")
    return s + [""]


def results_plot(results: dict, w: Workload, out_dir: Path) -> list[str]:
    """With probes, each family's best setting as throughput against p99; without, every setting against clients."""
    sweep_input = results["spec"]["sweep"]["input"]
    ok = [r for r in collapsed(results, w) if r["input"] == sweep_input and r["concurrency"] and not r["error"]]
    if not ok:
        return []
    if "probe" in results["spec"]:
        plot, curves = f"{w.name}_throughput_vs_p99.png", {}
        for r in ok:
            curves.setdefault(f"{w.family_title(r['family'])} ({r['setting']})", []).append(r)
        lim = results.get("limit")
        limits = {"limit (offline, best layout)": lim["best"][w.key]} if lim else {}
        title = f"{w.title} throughput vs p99 latency ({sweep_input} {w.request}s)"
        plots.throughput_vs_p99(curves, w.key, limits, f"{w.item}s / s", title, out_dir / plot)
        heading = "## Results at each family's best setting\n"
    else:
        plot, lines = f"{w.name}_vs_clients.png", {}
        for r in ok:
            name = r["setting"] if r["family"] == "kit" else f"{w.family_title(r['family'])} ({r['setting']})"
            lines.setdefault(name, []).append(r)
        plots.versus_clients(lines, w.key, f"{w.item}s / s", f"{w.title} throughput ({sweep_input} {w.request}s)", out_dir / plot)
        heading = "## Results at every setting\n"
    return [heading, f"![results]({plot})\n"]


def results_table(results: dict, w: Workload, input_name: str) -> list[str]:
    """Every swept point of one input set, with the kit's throughput over each target's at the same load."""
    cores, lim = results["machine"]["cores"], results.get("limit")
    if results["spec"].get("limit", {}).get("input", input_name) != input_name:
        lim = None  # measured on another input's items, whose work per item differs: no ratio to it
    swept = collapsed(results, w)
    several = len({r["family"] for r in swept}) > 1
    rows = [r for r in swept if r["input"] == input_name]
    kit: dict[str, dict] = {}  # the kit at its best setting at each load, as the verdicts count it
    for r in rows:
        if r["family"] == "kit" and r["throughput"] > kit.get(r["load"], {}).get("throughput", -1.0):
            kit[r["load"]] = r
    rounds, gpu = any("rounds" in r for r in rows), any("util_mean_pct" in r.get("gpu", {}) for r in rows)
    headers = [
        "target",
        "setting",
        "load",
        *rate_headers(w),
        *(["rounds (min-max)"] if rounds else []),
        "p50 s",
        "p99 s",
        *(["GPU util %", "GPU MiB"] if gpu else []),
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
            *([f"{r['rounds']} ({r['spread'][0]:.2f}-{r['spread'][1]:.2f})"] if rounds else []),
            sec(r["p50_ms"]),
            sec(r["p99_ms"]),
            *(gpu_cells(r) if gpu else []),
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
    return [f"**{input_name} {w.request}s**\n", *table(headers, cells), ""] if rows else []


def gpu_cells(row: dict) -> list[str]:
    g = row.get("gpu", {})
    return [f"{g['util_mean_pct']:.0f}", f"{g['memory_max_mib']:.0f}"] if "util_mean_pct" in g else ["-", "-"]


def limit_rounds_section(results: dict, w: Workload) -> list[str]:
    """The limit measured in every round: each layout's median and spread over the rounds."""
    points: dict[tuple, list[float]] = {}
    for r in results["limit_rounds"]:
        for layout in r.get("layouts", [r["best"]]):
            points.setdefault((layout["layout"], layout.get("batch")), []).append(layout[w.key])  # OCR's: no batch
    batches = any(batch is not None for _, batch in points)
    rows = [
        [layout, *([batch] if batches else []), f"{statistics.median(rates):.2f}", f"{min(rates):.2f}-{max(rates):.2f}"]
        for (layout, batch), rates in points.items()
    ]
    rounds = len({r["round"] for r in results["limit_rounds"]})
    return [
        f"## The limit in turns ({rounds} rounds)\n",
        *table(["layout", *(["batch"] if batches else []), f"median {w.item}s/s", "min-max"], rows),
        "",
    ]


def cost_section(results: dict, w: Workload) -> list[str]:
    """Where the server's CPU goes per item, by role, the simulated device's busy share, and what follows for a
    host of the spec's `projection` cores: items/s it could feed = cores / CPU-seconds per item, against the device's
    limit (the offline limit of the run)."""
    cores = results["spec"]["projection"]["cores"]
    lim = results.get("limit")
    limit = lim["best"][w.key] if lim else None
    rows = [r for r in collapsed(results, w) if r["input"] == results["spec"]["sweep"]["input"] and not r["error"]]
    roles = list(dict.fromkeys(role for r in rows for role in r.get("server_cpu_s_by_role", {})))
    cells = []
    for r in rows:
        items = r[w.key] * r["wall_s"]
        per_item = r["server_cpu_s"] / items if items else float("inf")
        by_role = r.get("server_cpu_s_by_role", {})
        feed = cores / per_item if per_item else float("inf")
        cells.append(
            [
                w.family_title(r["family"]),
                r["setting"],
                r["load"],
                f"{r[w.key]:.0f}",
                f"{1000 * per_item:.2f}",
                *(f"{1000 * by_role[role] / items:.2f}" if role in by_role and items else "-" for role in roles),
                f"{100 * r['device_busy_s'] / r['wall_s']:.0f}%" if r.get("device_busy_s") else "-",
                f"{feed:,.0f}",
                *([f"{feed / limit:.1f}"] if limit else []),
            ]
        )
    device = f"the simulated device's limit, {limit:,.0f} {w.item}s/s (the run's offline limit)" if limit else "no limit"
    return [
        f"## Serving cost: CPU per {w.item} and what {cores} cores could feed\n",
        f"Server CPU (every process of the target: server, stubs, door, workers) per {w.item} served, in milliseconds, "
        f"and split by process role; the device's busy share of the window; {cores} / CPU-seconds per {w.item}, the "
        f"{w.item}s/s a {cores}-core host could feed, against {device}.\n",
        *table(
            [
                "target",
                "setting",
                "load",
                f"{w.item}s/s",
                f"CPU ms / {w.item}",
                *(f"{role} ms" for role in roles),
                "device busy",
                f"{cores} cores feed {w.item}s/s",
                *(["x device limit"] if limit else []),
            ],
            cells,
        ),
        "",
    ]


def accuracy_section(results: dict) -> list[str]:
    check = results["accuracy"]
    facts = ", ".join(
        f"{k.replace('_', ' ')} {v:.3g}" if isinstance(v, float) else f"{k.replace('_', ' ')} {v}"
        for k, v in check.items()
        if k != "reference"
    )
    return ["## Served against the reference\n", f"Against {check['reference']}: {facts}.\n"]


def problems_section(results: dict) -> list[str]:
    """What the run skipped (a deadline) or failed on (a server that did not start), each with why."""
    lines = [f"- skipped: {x['what']} ({x['why']})" for x in results.get("skipped", [])]
    for x in results.get("errors", []):
        lines.append(f"- failed: {x['what']}: `{x['error']}`")
        lines += [f"    - `{line}`" for line in x.get("log_tail", [])[-5:]]
    return ["## Skipped and failed steps\n", *lines, ""] if lines else []


def probes_section(results: dict, w: Workload, out_dir: Path) -> list[str]:
    cores = results["machine"]["cores"]
    groups: dict[str, list[dict]] = {}
    for r in results["probes"]:
        if not r["error"]:
            groups.setdefault(w.family_title(r["family"]), []).append(r)
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
            w.family_title(r["family"]),
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
    """Peak RSS (MiB) per family and worker/instance count, the largest seen at that count."""
    by_workers: dict[str, dict[int, int]] = {}
    for r in results["probes"] + results["sweeps"]:
        cell = by_workers.setdefault(w.family_title(r["family"]), {})
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
    if kit_rows:
        s.append(f"\nThe kit at its chosen layout ({kit_rows[0]['setting']}): {max(r['peak_rss_mb'] for r in kit_rows)} MiB.")
    return s + [""]


def render(results: dict, w: Workload, out_dir: Path) -> str:
    s = [
        f"# {w.title} performance\n",
        "Generated by `python -m perf` from results.json in this folder; do not edit by hand. "
        f"Every workload's report: [perf/RESULTS.md]({os.path.relpath(INDEX, out_dir.resolve())}).\n",
        *how_measured(results, w, out_dir),
        *results_plot(results, w, out_dir),
        *(line for i in results["spec"]["inputs"] for line in results_table(results, w, i["name"])),
    ]
    s += problems_section(results)
    verdicts = judge(w, results)
    if verdicts:
        s += ["## Targets\n", *verdict_lines(verdicts), ""]
    if results.get("accuracy"):
        s += accuracy_section(results)
    if results.get("limit_rounds"):
        s += limit_rounds_section(results, w)
    if "projection" in results["spec"]:
        s += cost_section(results, w)
    s += w.sections(results, out_dir) + time_section(results, w) + runner_section(results, w)
    if results["probes"]:
        s += probes_section(results, w, out_dir)
    if results["probes"] + results["sweeps"] and all("peak_rss_mb" in r for r in results["probes"] + results["sweeps"]):
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
    verdicts = judge(w, results)
    met = f"{sum(v.met for v in verdicts)} of {len(verdicts)}" if verdicts else "-"
    run = f"`{results.get('rerun') or results['command']}`" + (f", {results['started']}" if results.get("started") else "")
    link = os.path.relpath(report.resolve(), index.resolve().parent)
    return [w.title, f"[{link}]({link})", run, w.headline(results), met]


def extras_lines(index: Path) -> list[str]:
    """The other committed results (perf/results/extras.json), one line each: what it holds, the command that
    makes it today (or, `at` a commit, made it before its probe or spec was removed), its file."""
    if not EXTRAS.is_file():
        return []
    lines = ["", "Other committed results:\n"]
    for extra in json.loads(EXTRAS.read_text()):
        link = os.path.relpath(RESULTS / extra["file"], index.resolve().parent)
        made = f" (made as `{extra['made_by']}`, the command line of the time)" if extra.get("made_by") else ""
        at = f" at commit {extra['at']}, removed since" if extra.get("at") else ""
        lines.append(f"- {extra['title']}: `{extra['command']}`{at}{made} -> [{link}]({link})")
    return lines


def write_index(
    reports: Iterable[tuple[Workload, dict, Path]], index: Path = INDEX, title: str | None = None, extras: bool | None = None
) -> Path:
    """One line per workload (its report, its run, its headline, its targets), as `reports` lists them; the
    committed index (the default path) adds the other committed results."""
    rows = [index_row(w, results, report, index) for w, results, report in reports]
    index.write_text(
        "\n".join(
            [
                f"# {title or 'Performance results'}\n",
                "One report per workload, each generated by `python -m perf` from its run's results.json "
                "(docs/PERFORMANCE.md: how each benchmark runs and what it measures). Do not edit by hand.\n",
                *table(["workload", "report", "run", "headline", "targets met"], rows),
                *(extras_lines(index) if (index == INDEX if extras is None else extras) else []),
                "",
            ]
        )
    )
    return index
