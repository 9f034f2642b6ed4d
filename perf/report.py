"""The Markdown report and its plots, from a sweep's results.json.

    python -m perf.report perf/results/results.json --out perf/RESULTS.md

Sections this tool writes start with "## RADAR"; any other "## " section already in the file
(another workload's, e.g. "## ResNet50") is kept as it is, after them. Targets are judged from
the numbers; perf/analysis.md (the reading of the committed run, by a person) is included as is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import matplotlib

from kit.repository import REPO_ROOT

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAMES = {"kit": "kit (Triton)", "flask": "Flask", "gunicorn": "gunicorn gthread", "uvicorn": "FastAPI + uvicorn",
         "batcher": "FastAPI + asyncio batcher"}
ANALYSIS = Path(__file__).resolve().parent / "analysis.md"


def sec(ms: float) -> str:
    return f"{ms / 1000:.2f}" if ms < 10_000 else f"{ms / 1000:.1f}"


def per_cpu(row: dict) -> str:
    """Chunks per server CPU-second: robust to how much of the shared cores a target happened to get."""
    return f"{row['chunks_per_s'] * row['wall_s'] / row['server_cpu_s']:.2f}" if row["server_cpu_s"] else "-"


def pct(cpu_s: float, wall_s: float, cores: int) -> str:
    return f"{100 * cpu_s / wall_s / cores:.0f}%" if wall_s else "-"


def best_rows(results: dict, input_name: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in results["sweeps"]:
        if row["input"] == input_name:
            out.setdefault(row["family"], []).append(row)
    return out


def plot_curves(results: dict, input_name: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for family, rows in best_rows(results, input_name).items():
        rows = [r for r in rows if r["concurrency"] and not r["error"]]
        if not rows:
            continue
        ax.plot([r["p99_ms"] / 1000 for r in rows], [r["chunks_per_s"] for r in rows], marker="o",
                label=f"{NAMES[family]} ({rows[0]['setting']})")
        for r in rows:
            ax.annotate(f"c={r['concurrency']}", (r["p99_ms"] / 1000, r["chunks_per_s"]), fontsize=7,
                        textcoords="offset points", xytext=(3, 3))
    ax.axhline(results["limit"]["best"]["chunks_per_s"], color="grey", linestyle="--", label="limit (offline, best layout)")
    ax.set_xlabel("p99 latency (s)")
    ax.set_ylabel("chunks / s")
    ax.set_title(f"RADAR throughput vs p99 latency ({input_name} texts)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_probes(results: dict, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    families = sorted({r["family"] for r in results["probes"]})
    for family in families:
        rows = [r for r in results["probes"] if r["family"] == family and not r["error"]]
        ax.scatter([r["p99_ms"] / 1000 for r in rows], [r["chunks_per_s"] for r in rows], label=NAMES[family])
        for r in rows:
            ax.annotate(r["setting"], (r["p99_ms"] / 1000, r["chunks_per_s"]), fontsize=6, textcoords="offset points", xytext=(3, 2))
    probe = results["spec"]["probe"]
    ax.set_xlabel("p99 latency (s)")
    ax.set_ylabel("chunks / s")
    ax.set_title(f"Settings probed at {probe['concurrency']} clients")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_memory(results: dict, path: Path) -> None:
    table = memory_table(results)
    fig, ax = plt.subplots(figsize=(7, 4))
    workers = [1, 2, 4]
    width = 0.8 / max(1, len(table))
    for i, (family, by_workers) in enumerate(table.items()):
        xs = [w + (i - len(table) / 2) * width * 0.9 for w in range(len(workers))]
        ax.bar(xs, [by_workers.get(w, 0) / 1024 for w in workers], width * 0.9, label=NAMES[family])
    ax.set_xticks(range(len(workers)), [f"{w} worker(s) / instance(s)" for w in workers])
    ax.set_ylabel("peak resident memory (GiB)")
    ax.set_title("Memory of each target")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def memory_table(results: dict) -> dict[str, dict[int, int]]:
    """Peak RSS (MiB) per family and worker/instance count, the largest seen at that count."""
    table: dict[str, dict[int, int]] = {}
    for r in results["probes"] + results["sweeps"]:
        cell = table.setdefault(r["family"], {})
        cell[r["workers"]] = max(cell.get(r["workers"], 0), r["peak_rss_mb"])
    return table


def fmt_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def triton_profile(row: dict) -> list:
    """Per text: entry queue and compute, classifier queue and compute, average classifier batch."""
    t = row.get("triton") or {}
    entry, clf = t.get("radar", {}), t.get("radar_classifier", {})
    if not entry.get("requests") or not clf.get("executions"):
        return ["-"] * 6
    ms = lambda ns, n: f"{ns / n / 1e6:.0f}"  # noqa: E731
    return [ms(entry["queue"], entry["requests"]), ms(entry["compute_infer"], entry["requests"]),
            ms(clf["queue"], clf["requests"]), ms(clf["compute_infer"], clf["executions"]),
            f"{clf['inferences'] / clf['executions']:.1f}",
            ms(entry["compute_input"] + entry["compute_output"] + clf["compute_input"] + clf["compute_output"], entry["requests"])]


def verdicts(results: dict, sweep_input: str) -> list[str]:
    """The issue's RADAR targets, judged from this run's numbers."""
    rows = best_rows(results, sweep_input)
    kit = {r["concurrency"]: r for r in rows.get("kit", []) if r["concurrency"]}
    limit = results["limit"]["best"]["chunks_per_s"]
    lines = []
    for c in (16, 64):
        if c in kit:
            ratio = kit[c]["chunks_per_s"] / limit
            lines.append(f"- **{c} clients, kit >= 0.9 x limit**: {ratio:.2f} x -> **{'met' if ratio >= 0.9 else 'missed'}**")
    for family, family_rows in rows.items():
        if family == "kit":
            continue
        for r in family_rows:
            k = kit.get(r["concurrency"])
            if not k or not r["concurrency"]:
                continue
            if r["error"] or k["error"]:
                lines.append(f"- **kit vs {NAMES[family]} at {r['concurrency']} clients**: a run failed (kit: {k['error'] or 'ok'}; {family}: {r['error'] or 'ok'})")
                continue
            met = k["throughput"] >= r["throughput"] and k["p99_ms"] <= r["p99_ms"]
            lines.append(f"- **kit vs {NAMES[family]} at {r['concurrency']} clients**: throughput {k['throughput'] / r['throughput']:.2f} x, "
                         f"p99 {sec(k['p99_ms'])} s vs {sec(r['p99_ms'])} s -> **{'met' if met else 'missed'}**")
    for family, family_rows in rows.items():
        for r in family_rows:
            if r["concurrency"] == 256:
                ok = not r["error"]
                lines.append(f"- **zero failed requests at 256 clients, {NAMES[family]}**: {'met' if ok else 'missed: ' + r['error']}")
    return lines


def radar_sections(results: dict, out_dir: Path, report_dir: Path) -> str:
    spec, m, lim = results["spec"], results["machine"], results["limit"]
    cores = m["cores"]
    sweep_input = spec["sweep"]["input"]
    rel = lambda p: os.path.relpath(p, report_dir)  # noqa: E731
    plot_curves(results, sweep_input, out_dir / "radar_throughput_vs_p99.png")
    plot_probes(results, out_dir / "radar_settings.png")
    plot_memory(results, out_dir / "radar_memory.png")
    s = [f"## RADAR: how this was measured\n",
         f"- Machine: {m['cpu']}, {cores} cores, {m['memory_gib']} GiB, {m['os']}, Python {m['python']}; "
         f"load average {', '.join(f'{x:.2f}' for x in m['load_average_at_start'])} at the start and "
         f"{', '.join(f'{x:.2f}' for x in results.get('load_average_at_end', []))} at the end (the cores are shared: ratios, measured side by side, are what count).",
         f"- Command: `{results['command']}` (spec `{Path(spec['path']).name}`), commit {results['commit']}, started {results['started']}, took {results['minutes']} min.",
         f"- Model: `{results['model']}`: {spec.get('model_note', 'the exported RADAR classifier')}.",
         "- Inputs: " + "; ".join(f"`{i['name']}`: {i['count']} texts of {i['min_chars']}-{i['max_chars']} characters (kit.text.corpus, seed {i['seed']})" for i in spec["inputs"]) + ".",
         "- Load generator: perf_analyzer 2.51 for every target, `--async`, a fixed number of requests per point "
         f"(per client {spec['requests']['per_client']}, at least {spec['requests']['min']}, at most {spec['requests']['max']}); "
         "Triton over gRPC, the baselines as JSON POSTs (perf_analyzer's `openai` service kind). Same texts, same chunking and length buckets, same ONNX model; "
         "a chunk is counted as requests/s x the mean chunks per text of the input set.",
         f"- Each family's settings were probed at {spec['probe']['concurrency']} clients ({spec['probe']['requests']} requests); the best one (highest throughput) is swept below.\n",
         f"## RADAR: results at each family's best setting\n",
         f"![throughput vs p99]({rel(out_dir / 'radar_throughput_vs_p99.png')})\n"]
    limit_cps = lim["best"]["chunks_per_s"]
    for input_name in [i["name"] for i in spec["inputs"]]:
        rows = best_rows(results, input_name)
        if not rows:
            continue
        kit = {r["load"]: r for r in rows.get("kit", [])}
        s.append(f"**{input_name} texts**\n")
        s.append(fmt_row(["target", "setting", "load", "texts/s", "chunks/s", "p50 s", "p99 s", "served / limit", "kit / target",
                          "server CPU", "chunks / server CPU-s", "client CPU", "failed"]))
        s.append(fmt_row(["---"] * 13))
        for family, family_rows in rows.items():
            for r in family_rows:
                k = kit.get(r["load"])
                ratio = f"{k['throughput'] / r['throughput']:.2f}" if k and r["throughput"] and k["throughput"] else "-"
                s.append(fmt_row([NAMES[family], r["setting"], r["load"], f"{r['throughput']:.2f}", f"{r['chunks_per_s']:.2f}",
                                  sec(r['p50_ms']), sec(r['p99_ms']), f"{r['chunks_per_s'] / limit_cps:.2f}", ratio,
                                  pct(r["server_cpu_s"], r["wall_s"], cores), per_cpu(r), pct(r["client_cpu_s"], r["wall_s"], cores),
                                  r["error"] or "0"]))
        s.append("")
    s.append("## RADAR: targets\n")
    s += verdicts(results, sweep_input)
    s.append("")
    s.append("## RADAR: the limit (offline, in-process, same chunks)\n")
    s.append(fmt_row(["layout", "batch", "chunks/s", "chunks / CPU-s"]))
    s.append(fmt_row(["---"] * 4))
    for r in lim["layouts"]:
        s.append(fmt_row([r["layout"], r["batch"], f"{r['chunks_per_s']:.2f}", f"{r['chunks_per_cpu_s']:.2f}"]))
    s.append(f"\nBest: **{lim['best']['layout']} at batch {lim['best']['batch']}: {limit_cps:.2f} chunks/s** "
             f"({lim['texts_per_s']:.2f} texts/s at {lim['chunks_per_text']:.2f} chunks per text), over {lim['chunks']} chunks.\n")
    s.append("## RADAR: where the kit's time goes\n")
    s.append("Triton's own counters over each run, per text request (entry = the `radar` Python model, which waits on its BLS "
             "calls; classifier = `radar_classifier`, per execution). Stub I/O is the Python backends' input+output copying.\n")
    s.append(fmt_row(["input", "load", "entry queue ms", "entry compute ms", "classifier queue ms", "classifier ms / execution", "avg batch", "stub I/O ms / text", "server CPU", "client CPU"]))
    s.append(fmt_row(["---"] * 10))
    for r in results["sweeps"]:
        if r["family"] == "kit":
            s.append(fmt_row([r["input"], r["load"], *triton_profile(r), pct(r["server_cpu_s"], r["wall_s"], cores), pct(r["client_cpu_s"], r["wall_s"], cores)]))
    s.append("\n## RADAR: settings probed\n")
    s.append(f"![settings]({rel(out_dir / 'radar_settings.png')})\n")
    s.append(fmt_row(["target", "setting", "workers / instances", "texts/s", "chunks/s", "p99 s", "peak RSS MiB", "server CPU",
                      "chunks / server CPU-s", "client CPU", "failed"]))
    s.append(fmt_row(["---"] * 11))
    for r in results["probes"]:
        s.append(fmt_row([NAMES[r["family"]], r["setting"], r["workers"], f"{r['throughput']:.2f}", f"{r['chunks_per_s']:.2f}",
                          sec(r["p99_ms"]), r["peak_rss_mb"], pct(r["server_cpu_s"], r["wall_s"], cores), per_cpu(r),
                          pct(r["client_cpu_s"], r["wall_s"], cores), r["error"] or "0"]))
    s.append("\n## RADAR: memory\n")
    s.append(f"![memory]({rel(out_dir / 'radar_memory.png')})\n")
    s.append("Peak resident memory of the whole process tree (server, workers, Python stubs) during a run, MiB.\n")
    table = memory_table(results)
    counts = sorted({w for by in table.values() for w in by})
    s.append(fmt_row(["target", *[f"{w} worker(s) / instance(s)" for w in counts]]))
    s.append(fmt_row(["---"] * (len(counts) + 1)))
    for family, by_workers in table.items():
        s.append(fmt_row([NAMES[family], *[by_workers.get(w, "-") for w in counts]]))
    kit_rows = [r for r in results["sweeps"] if r["family"] == "kit"]
    if kit_rows:
        s.append(f"\nThe kit at its chosen layout ({kit_rows[0]['setting']}): {max(r['peak_rss_mb'] for r in kit_rows)} MiB.")
    tune = out_dir / "tune.json"
    if tune.is_file():
        s.append(tune_section(json.loads(tune.read_text())))
    if ANALYSIS.is_file():
        s.append("\n## RADAR: analysis\n")
        s.append(ANALYSIS.read_text().strip())
    return "\n".join(s) + "\n"


def tune_section(tune: dict) -> str:
    s = [f"\n## RADAR: layout search (`make tune`)\n",
         f"At {tune['concurrency']} clients, p99 budget {tune['p99_budget_ms'] / 1000:.0f} s for the entry model end to end; "
         f"run {tune['started']}. Winner written to `model_repository/profiles/cpu.json`: **{tune['winner']['setting']}**.\n",
         fmt_row(["stage", "setting", "texts/s", "p99 s", "within budget"]), fmt_row(["---"] * 5)]
    for r in tune["trials"]:
        s.append(fmt_row([r["stage"], r["setting"], f"{r['throughput']:.2f}", sec(r['p99_ms']), "yes" if r["within_budget"] else "no"]))
    return "\n".join(s)


def kept_sections(existing: str) -> str:
    """Other owners' "## " sections, unchanged."""
    parts = re.split(r"(?m)^(?=## )", existing)
    return "".join(p for p in parts[1:] if not p.startswith("## RADAR")).strip()


def write_report(results: dict, out_dir: Path, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = kept_sections(path.read_text()) if path.is_file() else ""
    source = os.path.relpath(out_dir / "results.json", REPO_ROOT)
    head = (f"# Performance results\n\nGenerated by `python -m perf.sweep` (`make perf`) from `{source}`; "
            "do not edit the RADAR sections by hand.\n\n")
    path.write_text(head + radar_sections(results, out_dir, path.parent) + ("\n" + kept + "\n" if kept else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    write_report(json.loads(args.results.read_text()), args.results.parent, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
