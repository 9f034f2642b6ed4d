"""Markdown tables and the figures in their cells, for every workload's report."""

from __future__ import annotations

import re

from perf.engine.workload import Verdict, Workload

KIT_FAMILIES = ("kit", "control")  # the families served by the kit's Triton, whose counters split its time


def sec(ms: float) -> str:
    return f"{ms / 1000:.2f}" if ms < 10_000 else f"{ms / 1000:.1f}"


def pct(cpu_s: float, wall_s: float, cores: int) -> str:
    return f"{100 * cpu_s / wall_s / cores:.0f}%" if wall_s else "-"


def per_cpu(row: dict, key: str) -> str:
    """Items per server CPU-second: robust to how much of the shared cores a target happened to get."""
    return f"{row[key] * row['wall_s'] / row['server_cpu_s']:.2f}" if row["server_cpu_s"] else "-"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def fmt_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(headers: list[str], rows: list[list]) -> list[str]:
    return [fmt_row(headers), fmt_row(["---"] * len(headers)), *(fmt_row(r) for r in rows)]


def limit_section(lim: dict, item: str, note: str = "", best_after: str = "") -> list[str]:
    """The limit's layouts, their batch sizes where they have them, and the best; `note` says what it ran, `best_after`
    adds to the line of the best."""
    key, batched = f"{item}s_per_s", all("batch" in r for r in lim["layouts"])
    headers = ["layout", *(["batch"] if batched else []), f"{item}s/s", f"{item}s / CPU-s"]
    rows = [
        [r["layout"], *([r["batch"]] if batched else []), f"{r[key]:.2f}", f"{r[f'{item}s_per_cpu_s']:.2f}"]
        for r in lim["layouts"]
    ]
    best = lim["best"]
    at = f" at batch {best['batch']}" if batched else ""
    return [
        f"## The limit (offline, in-process, same {item}s)\n",
        *([note] if note else []),
        *table(headers, rows),
        f"\nBest: **{best['layout']}{at}: {best[key]:.2f} {item}s/s**{best_after}.\n",
    ]


TIME_NOTE = (
    "Triton's own counters over each kit point, for each model: its queue per request (ms), its compute per execution "
    "(ms, from Triton's batch statistics; in runs from before they were read, per request: the compute of the execution "
    "the request was in) and the requests an execution merged. "
)


def model_times(stats: dict | None) -> list[str]:
    """One model's queue per request, compute per execution and requests per execution, from its counters over a point."""
    if not stats or not stats.get("requests") or not stats.get("executions"):
        return ["-"] * 3
    executed = stats.get("execution_compute_infer")
    compute = executed / stats["executions"] if executed else stats["compute_infer"] / stats["requests"]
    queue, merged = stats["queue"] / stats["requests"], stats["inferences"] / stats["executions"]
    return [f"{queue / 1e6:.1f}", f"{compute / 1e6:.1f}", f"{merged:.1f}"]


def time_section(results: dict, w: Workload) -> list[str]:
    """Where the kit's time goes: each kit point (and the control's), its input and load, the times of each model of
    `w.timed` (the first of its names that the point's counters hold), server and client CPU."""
    if not w.timed:
        return []
    cores, rows = results["machine"]["cores"], []
    for r in (r for r in results["sweeps"] if r["family"] in KIT_FAMILIES):
        counters = r.get("triton") or {}
        times = [cell for names in w.timed for cell in model_times(next(filter(None, map(counters.get, names)), None))]
        where = r["input"] + (f" ({r['family']})" if r["family"] != "kit" else "")
        rows.append(
            [where, r["load"], *times, pct(r["server_cpu_s"], r["wall_s"], cores), pct(r["client_cpu_s"], r["wall_s"], cores)]
        )
    headers = [f"{names[0]} {what}" for names in w.timed for what in ("queue ms", "ms / execution", "per execution")]
    lines = table(["input", "load", *headers, "server CPU", "client CPU"], rows)
    return ["## Where the kit's time goes\n", TIME_NOTE + w.time_note + "\n", *lines, ""]


def verdict_lines(verdicts: list[Verdict]) -> list[str]:
    return [f"- **{v.target}**: {v.detail} -> **{'met' if v.met else 'missed'}**" for v in verdicts]


def relative_table(rows: list[dict], reference: str, key: str) -> list[str]:
    """Each setting's throughput over the `reference` setting's at the same load, settings by loads."""
    loads = list(dict.fromkeys(r["load"] for r in rows))
    base = {r["load"]: r[key] for r in rows if r["setting"] == reference}
    cells: dict[str, dict[str, str]] = {}
    for r in rows:
        cells.setdefault(r["setting"], {})[r["load"]] = f"{r[key] / base[r['load']]:.2f}x" if base.get(r["load"]) else "-"
    return table(
        ["setting", *loads], [[setting, *(by_load.get(load, "-") for load in loads)] for setting, by_load in cells.items()]
    )


# Where a runner instance's time over a window went, and what would move each part (the report names the largest).
HOLDS = {
    "waiting for work": "more work in flight to it: more requests from its callers, or a longer queue delay",
    "the forward pass": "a faster forward pass (CUDA graphs where a run had none, a compiled engine, lower precision)",
    "tensors and copies": "cheaper tensors and copies (pinned buffers, one copy per run)",
    "the stub around the runner": "less Python per execution around the runner (planning, requests, responses)",
}


def labelled(metrics: dict[str, float]) -> list[tuple[str, dict[str, str], float]]:
    """Each metric's name, labels and value, from `name{labels}` keys."""
    out = []
    for key, value in metrics.items():
        name, labels = key.split("{", 1)
        out.append((name, dict(re.findall(r'(\w+)="([^"]*)"', labels)), value))
    return out


def runner_figures(row: dict, model: str) -> dict | None:
    """The PyTorch runner's figures of `model` over a point (kit.adapters.runner_metrics, differenced): each stage's
    mean ms per run; runs and rows per execution (Triton's executions), the padding's share of the rows run, the share
    of runs replayed from CUDA graphs, the runs of shapes not warmed; and how its instances spent the window (Triton's
    compute per execution against the stages' sums). None where the model ran no such runner."""
    stages: dict[str, dict[str, float]] = {}
    runs, rows = [], {}
    for name, labels, value in labelled(row.get("metrics", {})):
        if labels.get("model") != model:
            continue
        if name.startswith("kit_runner_stage_seconds_"):
            stages.setdefault(labels["stage"], {})[name.rsplit("_", 1)[1]] = value
        elif name == "kit_runner_runs_total":
            runs.append((labels, value))
        elif name == "kit_runner_rows_total":
            rows[labels["rows"]] = value
    count, triton = sum(v for _, v in runs), row.get("triton", {}).get(model, {})
    if not count or not triton.get("executions") or set(stages) != {"tensors", "h2d", "forward", "d2h"}:
        return None
    executions, window = triton["executions"], row["wall_s"] * row["workers"]
    spent = {stage: v.get("sum", 0.0) for stage, v in stages.items()}
    copies = spent["tensors"] + spent["h2d"] + spent["d2h"]
    # Triton counts an execution's time when it ends, the runner each run's: an execution across a bound of the window
    # puts time on one side that the other counts on the other (seen with few long executions on a CPU).
    busy = max(triton.get("execution_compute_infer", 0) / 1e9, spent["forward"] + copies)
    window = max(window, busy)
    return {
        "stage_ms": {stage: 1000 * spent[stage] / v["count"] if v.get("count") else 0.0 for stage, v in stages.items()},
        "runs_per_execution": count / executions,
        "rows_per_execution": rows.get("asked", 0) / executions,
        "padding": rows.get("padding", 0) / max(1.0, rows.get("asked", 0) + rows.get("padding", 0)),
        "from_graphs": sum(v for labels, v in runs if labels["graph"] == "true") / count,
        "unwarmed": {labels["shape"]: int(v) for labels, v in runs if labels["warmed"] != "true" and v},
        "time": {
            "waiting for work": max(0.0, 1 - busy / window),
            "the forward pass": spent["forward"] / window,
            "tensors and copies": copies / window,
            "the stub around the runner": max(0.0, busy - spent["forward"] - copies) / window,
        }
        if busy
        else {},
    }


def unwarmed(runs: dict[str, int], shown: int = 4) -> str:
    """Runs of shapes the warm-up did not cover: the most frequent few, and how many shapes and runs in all."""
    if not runs:
        return "none"
    top = ", ".join(f"{shape} x{n}" for shape, n in sorted(runs.items(), key=lambda kv: -kv[1])[:shown])
    return f"{sum(runs.values())} runs of {len(runs)} shapes ({top}{', ...' if len(runs) > shown else ''})"


def held_by(figures: dict) -> str:
    """The part of a runner instance's time that holds a point, and what would move it."""
    if not figures["time"]:
        return "no execution time from Triton to split"
    part, share = max(figures["time"].items(), key=lambda kv: kv[1])
    return f"held by {part} ({share:.0%} of the runner's time): {HOLDS[part]}"


def runner_section(results: dict, w: Workload) -> list[str]:
    """Per kit point, what the runner did inside Triton's executions; the runners' warm-up; the traces written."""
    rows = []
    for r in results["sweeps"]:
        f = runner_figures(r, w.workers) if r["family"] in KIT_FAMILIES else None
        if f is None:
            continue
        util = f"{r['gpu']['util_mean_pct']:.0f}" if "util_mean_pct" in r.get("gpu", {}) else "-"
        per_execution = [f"{f['runs_per_execution']:.2f}", f"{f['rows_per_execution']:.1f}", f"{f['padding']:.0%}"]
        per_execution += [f"{f['from_graphs']:.0%}", unwarmed(f["unwarmed"])]
        stages = [f"{f['stage_ms'][stage]:.2f}" for stage in ("tensors", "h2d", "forward", "d2h")]
        shares = " / ".join(f"{share:.0%}" for share in f["time"].values()) or "-"
        where = [w.family_title(r["family"]), r["input"], r["load"], util]
        rows.append([*where, *per_execution, *stages, shares, held_by(f).split(":")[0]])
    if not rows:
        return []
    headers = "target|input|load|GPU util %|runs / execution|ITEMs / execution|padding|from graphs|unwarmed runs|"
    headers += "tensors ms|h2d ms|forward ms|d2h ms|waiting / forward / copies / stub|held by"
    out = [
        f"## The runner inside `{w.workers}`'s executions\n",
        "From the runner's own metrics on Triton's port (kit.adapters.runner_metrics), differenced over each window: runs "
        f"and {w.item}s per Triton execution, the padding's share of the rows run, runs replayed from CUDA graphs, runs of "
        "shapes the warm-up did not cover; each stage's mean ms per run (tensors built, copy to the device, forward pass, "
        "copy back, each synchronised); and the instances' time over the window: waiting for work / the forward pass / "
        "tensors and copies / the stub around the runner (Triton's compute per execution less the stages).\n",
        *table(headers.replace("ITEM", w.item).split("|"), rows),
        "",
    ]
    warm = []
    for target, figures in results.get("warm_ups", {}).items():
        what = {labels["what"]: v for name, labels, v in labelled(figures) if labels.get("model") == w.workers}
        seconds, mib = f"{what.get('seconds', 0):.1f}", (f"{what.get(k, 0) / 2**20:.0f}" for k in ("graph_bytes", "budget_bytes"))
        warm.append([target, f"{what.get('shapes', 0):.0f}", f"{what.get('graphs', 0):.0f}", seconds, *mib])
    if warm:
        out += [*table(["runner warmed before ready", "shapes", "CUDA graphs", "seconds", "graph MiB", "budget MiB"], warm), ""]
    if "traces" in results:
        traces = ", ".join(f"`{name}` ({size / 2**20:.1f} MiB)" for name, size in results["traces"].items()) or "none written"
        out.append(f"torch.profiler traces (a variant's `profile_executions`, in the run's `traces/`): {traces}.\n")
    return out
