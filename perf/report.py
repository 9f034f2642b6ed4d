"""The Markdown report and its plots, from a sweep's results.json.

    python -m perf.report perf/results/results.json --out perf/RESULTS.md

Sections this tool writes start with the workload's title, "## RADAR" or "## OCR"; a run rewrites
its own workload's sections and keeps the other's as they are (RADAR first, then OCR); any other
"## " section already in the file (another owner's, e.g. "## ResNet50") is kept as it is, after
them. Targets are judged from the numbers; perf/analysis.md (the reading of the committed RADAR
run, by a person) is included as is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

from kit.repository import REPO_ROOT, load_profile

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAMES = {"kit": "kit (Triton)", "flask": "Flask", "gunicorn": "gunicorn gthread", "uvicorn": "FastAPI + uvicorn",
         "batcher": "FastAPI + asyncio batcher"}
ANALYSIS = Path(__file__).resolve().parent / "analysis.md"


def sec(ms: float) -> str:
    return f"{ms / 1000:.2f}" if ms < 10_000 else f"{ms / 1000:.1f}"


def per_cpu(row: dict, key: str = "chunks_per_s") -> str:
    """Chunks (images) per server CPU-second: robust to how much of the shared cores a target happened to get."""
    return f"{row[key] * row['wall_s'] / row['server_cpu_s']:.2f}" if row["server_cpu_s"] else "-"


def pct(cpu_s: float, wall_s: float, cores: int) -> str:
    return f"{100 * cpu_s / wall_s / cores:.0f}%" if wall_s else "-"


def best_rows(results: dict, input_name: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in results["sweeps"]:
        if row["input"] == input_name:
            out.setdefault(row["family"], []).append(row)
    return out


def plot_curves(results: dict, input_name: str, path: Path, w: "Workload") -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for family, rows in best_rows(results, input_name).items():
        rows = [r for r in rows if r["concurrency"] and not r["error"]]
        if not rows:
            continue
        ax.plot([r["p99_ms"] / 1000 for r in rows], [r[w.key] for r in rows], marker="o",
                label=f"{NAMES[family]} ({rows[0]['setting']})")
        for r in rows:
            ax.annotate(f"c={r['concurrency']}", (r["p99_ms"] / 1000, r[w.key]), fontsize=7,
                        textcoords="offset points", xytext=(3, 3))
    ax.axhline(results["limit"]["best"][w.key], color="grey", linestyle="--", label="limit (offline, best layout)")
    ax.set_xlabel("p99 latency (s)")
    ax.set_ylabel(f"{w.item}s / s")
    ax.set_title(f"{w.title} throughput vs p99 latency ({input_name} {w.request}s)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_probes(results: dict, path: Path, w: "Workload") -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    families = sorted({r["family"] for r in results["probes"]})
    for family in families:
        rows = [r for r in results["probes"] if r["family"] == family and not r["error"]]
        ax.scatter([r["p99_ms"] / 1000 for r in rows], [r[w.key] for r in rows], label=NAMES[family])
        for r in rows:
            ax.annotate(r["setting"], (r["p99_ms"] / 1000, r[w.key]), fontsize=6, textcoords="offset points", xytext=(3, 2))
    probe = results["spec"]["probe"]
    ax.set_xlabel("p99 latency (s)")
    ax.set_ylabel(f"{w.item}s / s")
    ax.set_title(f"{w.title}: settings probed at {probe['concurrency']} clients")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_memory(results: dict, path: Path, w: "Workload") -> None:
    table = memory_table(results)
    fig, ax = plt.subplots(figsize=(7, 4))
    workers = [1, 2, 4]
    width = 0.8 / max(1, len(table))
    for i, (family, by_workers) in enumerate(table.items()):
        xs = [w + (i - len(table) / 2) * width * 0.9 for w in range(len(workers))]
        ax.bar(xs, [by_workers.get(w, 0) / 1024 for w in workers], width * 0.9, label=NAMES[family])
    ax.set_xticks(range(len(workers)), [f"{w} worker(s) / instance(s)" for w in workers])
    ax.set_ylabel("peak resident memory (GiB)")
    ax.set_title(f"{w.title}: memory of each target")
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


def limit_verdicts(kit: dict[int, dict], limit: float, clients: list[int], key: str) -> list[str]:
    lines = []
    for c in clients:
        if c in kit:
            ratio = kit[c][key] / limit
            lines.append(f"- **{c} clients, kit >= 0.9 x limit**: {ratio:.2f} x -> **{'met' if ratio >= 0.9 else 'missed'}**")
    return lines


def versus_verdicts(rows: dict[str, list[dict]], kit: dict[int, dict], with_setting: bool = False) -> list[str]:
    """Kit against each baseline at each load: throughput at least theirs and a p99 no worse."""
    lines = []
    for family, family_rows in rows.items():
        if family == "kit":
            continue
        for r in family_rows:
            k = kit.get(r["concurrency"])
            if not k or not r["concurrency"]:
                continue
            name = f"{NAMES[family]} ({r['setting']})" if with_setting else NAMES[family]
            if r["error"] or k["error"]:
                lines.append(f"- **kit vs {name} at {r['concurrency']} clients**: a run failed (kit: {k['error'] or 'ok'}; {family}: {r['error'] or 'ok'})")
                continue
            met = k["throughput"] >= r["throughput"] and k["p99_ms"] <= r["p99_ms"]
            lines.append(f"- **kit vs {name} at {r['concurrency']} clients**: throughput {k['throughput'] / r['throughput']:.2f} x, "
                         f"p99 {sec(k['p99_ms'])} s vs {sec(r['p99_ms'])} s -> **{'met' if met else 'missed'}**")
    return lines


def kit_by_clients(rows: dict[str, list[dict]]) -> dict[int, dict]:
    return {r["concurrency"]: r for r in rows.get("kit", []) if r["concurrency"]}


def verdicts(results: dict, sweep_input: str) -> list[str]:
    """The issue's RADAR targets, judged from this run's numbers."""
    rows = best_rows(results, sweep_input)
    kit = kit_by_clients(rows)
    lines = limit_verdicts(kit, results["limit"]["best"]["chunks_per_s"], [16, 64], "chunks_per_s") + versus_verdicts(rows, kit)
    for family, family_rows in rows.items():
        for r in family_rows:
            if r["concurrency"] == 256:
                ok = not r["error"]
                lines.append(f"- **zero failed requests at 256 clients, {NAMES[family]}**: {'met' if ok else 'missed: ' + r['error']}")
    return lines


def ocr_verdicts(results: dict, sweep_input: str) -> list[str]:
    """The issue's OCR targets: >= 0.9 x the limit at 8+ clients; >= FastAPI + uvicorn at its best worker
    count with a p99 no worse; no failed request at any point of any target."""
    rows = best_rows(results, sweep_input)
    kit = kit_by_clients(rows)
    lines = limit_verdicts(kit, results["limit"]["best"]["images_per_s"], [c for c in sorted(kit) if c >= 8], "images_per_s")
    lines += versus_verdicts(rows, kit, with_setting=True)
    for family in NAMES:
        points = [r for r in results["probes"] + results["sweeps"] if r["family"] == family]
        failed = [r for r in points if r["error"]]
        if points:
            verdict = "met" if not failed else f"missed: {len(failed)} of {len(points)} failed, e.g. {failed[0]['error']}"
            lines.append(f"- **zero failed requests, {NAMES[family]}** (all {len(points)} points, probes and sweep): {verdict}")
    return lines


def rate_headers(w: "Workload") -> list[str]:
    return [f"{w.request}s/s", f"{w.item}s/s"] if w.request != w.item else [f"{w.item}s/s"]


def rate_cells(row: dict, w: "Workload") -> list[str]:
    return [f"{row['throughput']:.2f}", f"{row[w.key]:.2f}"] if w.request != w.item else [f"{row[w.key]:.2f}"]


def sections(results: dict, out_dir: Path, report_dir: Path, w: "Workload") -> str:
    """All of one workload's sections."""
    spec, m, lim = results["spec"], results["machine"], results["limit"]
    cores = m["cores"]
    sweep_input = spec["sweep"]["input"]
    rel = lambda p: os.path.relpath(p, report_dir)  # noqa: E731
    plot_curves(results, sweep_input, out_dir / f"{w.prefix}_throughput_vs_p99.png", w)
    plot_probes(results, out_dir / f"{w.prefix}_settings.png", w)
    plot_memory(results, out_dir / f"{w.prefix}_memory.png", w)
    source = os.path.relpath(out_dir / "results.json", REPO_ROOT)
    s = [f"## {w.title}: how this was measured\n",
         f"- Machine: {m['cpu']}, {cores} cores, {m['memory_gib']} GiB, {m['os']}, Python {m['python']}; "
         f"load average {', '.join(f'{x:.2f}' for x in m['load_average_at_start'])} at the start and "
         f"{', '.join(f'{x:.2f}' for x in results.get('load_average_at_end', []))} at the end (the cores are shared: ratios, measured side by side, are what count).",
         f"- Command: `{results['command']}` (spec `{Path(spec['path']).name}`; raw results `{source}`), commit {results['commit']}, started {results['started']}, took {results['minutes']} min.",
         f"- Model: `{results['model']}`: {spec.get('model_note', w.model_note)}.",
         f"- Inputs: {w.inputs(spec)}.",
         "- Load generator: perf_analyzer 2.51 for every target, `--async`, a fixed number of requests per point "
         f"(per client {spec['requests']['per_client']}, at least {spec['requests']['min']}, at most {spec['requests']['max']}); {w.load_note}",
         f"- Each family's settings were probed at {spec['probe']['concurrency']} clients ({spec['probe']['requests']} requests); the best one (highest throughput) is swept below.\n",
         f"## {w.title}: results at each family's best setting\n",
         f"![throughput vs p99]({rel(out_dir / f'{w.prefix}_throughput_vs_p99.png')})\n"]
    limit_rate = lim["best"][w.key]
    for input_name in [i["name"] for i in spec["inputs"]]:
        rows = best_rows(results, input_name)
        if not rows:
            continue
        kit = {r["load"]: r for r in rows.get("kit", [])}
        s.append(f"**{input_name} {w.request}s**\n")
        s.append(fmt_row(["target", "setting", "load", *rate_headers(w), "p50 s", "p99 s", "served / limit", "kit / target",
                          "server CPU", f"{w.item}s / server CPU-s", "client CPU", "failed"]))
        s.append(fmt_row(["---"] * (11 + len(rate_headers(w)))))
        for family, family_rows in rows.items():
            for r in family_rows:
                k = kit.get(r["load"])
                ratio = f"{k['throughput'] / r['throughput']:.2f}" if k and r["throughput"] and k["throughput"] else "-"
                s.append(fmt_row([NAMES[family], r["setting"], r["load"], *rate_cells(r, w),
                                  sec(r['p50_ms']), sec(r['p99_ms']), f"{r[w.key] / limit_rate:.2f}", ratio,
                                  pct(r["server_cpu_s"], r["wall_s"], cores), per_cpu(r, w.key), pct(r["client_cpu_s"], r["wall_s"], cores),
                                  r["error"] or "0"]))
        s.append("")
    s.append(f"## {w.title}: targets\n")
    s += w.verdicts(results, sweep_input)
    s.append("")
    s += w.limit(lim)
    s += w.time_split(results, cores)
    s.append(f"\n## {w.title}: settings probed\n")
    s.append(f"![settings]({rel(out_dir / f'{w.prefix}_settings.png')})\n")
    s.append(fmt_row(["target", "setting", "workers / instances", *rate_headers(w), "p99 s", "peak RSS MiB", "server CPU",
                      f"{w.item}s / server CPU-s", "client CPU", "failed"]))
    s.append(fmt_row(["---"] * (9 + len(rate_headers(w)))))
    for r in results["probes"]:
        s.append(fmt_row([NAMES[r["family"]], r["setting"], r["workers"], *rate_cells(r, w),
                          sec(r["p99_ms"]), r["peak_rss_mb"], pct(r["server_cpu_s"], r["wall_s"], cores), per_cpu(r, w.key),
                          pct(r["client_cpu_s"], r["wall_s"], cores), r["error"] or "0"]))
    s.append(f"\n## {w.title}: memory\n")
    s.append(f"![memory]({rel(out_dir / f'{w.prefix}_memory.png')})\n")
    s.append(f"Peak resident memory of the whole process tree (server, workers, Python stubs) during a run, MiB. {w.workers_note}\n")
    table = memory_table(results)
    counts = sorted({w for by in table.values() for w in by})
    s.append(fmt_row(["target", *[f"{n} worker(s) / instance(s)" for n in counts]]))
    s.append(fmt_row(["---"] * (len(counts) + 1)))
    for family, by_workers in table.items():
        s.append(fmt_row([NAMES[family], *[by_workers.get(n, "-") for n in counts]]))
    kit_rows = [r for r in results["sweeps"] if r["family"] == "kit"]
    if kit_rows:
        s.append(f"\nThe kit at its chosen layout ({kit_rows[0]['setting']}): {max(r['peak_rss_mb'] for r in kit_rows)} MiB.")
    s += w.extras(out_dir)
    return "\n".join(s) + "\n"


def radar_inputs_line(spec: dict) -> str:
    return "; ".join(f"`{i['name']}`: {i['count']} texts of {i['min_chars']}-{i['max_chars']} characters (kit.text.corpus, seed {i['seed']})"
                     for i in spec["inputs"])


def ocr_inputs_line(spec: dict) -> str:
    return "; ".join(f"`{i['name']}`: {i['count']} generated PNG images (perf.ocr_client.sample_images, seed {i['seed']}): documents of "
                     "printed lines 640-1200 px wide and health-code screenshots 540-1080 px wide, alternating" for i in spec["inputs"])


def radar_limit(lim: dict) -> list[str]:
    s = ["## RADAR: the limit (offline, in-process, same chunks)\n", fmt_row(["layout", "batch", "chunks/s", "chunks / CPU-s"]), fmt_row(["---"] * 4)]
    for r in lim["layouts"]:
        s.append(fmt_row([r["layout"], r["batch"], f"{r['chunks_per_s']:.2f}", f"{r['chunks_per_cpu_s']:.2f}"]))
    buckets = f", padded to {lim['bucket_count']} length buckets as every target of the run" if "bucket_count" in lim else ""
    s.append(f"\nBest: **{lim['best']['layout']} at batch {lim['best']['batch']}: {lim['best']['chunks_per_s']:.2f} chunks/s** "
             f"({lim['texts_per_s']:.2f} texts/s at {lim['chunks_per_text']:.2f} chunks per text), over {lim['chunks']} chunks{buckets}.\n")
    return s


def ocr_limit(lim: dict) -> list[str]:
    s = ["## OCR: the limit (offline, in-process, same images)\n",
         "The kit's pipeline in-process on the same encoded images (decoding, pre- and post-processing, the det/cls/rec "
         "ONNX Runtime sessions; perf/baselines/ocr_model.py), one image after another per process, no server. Layouts: one "
         "process whose sessions use all cores, or one 1-thread process per core, each taking the next image.\n",
         fmt_row(["layout", "images/s", "images / CPU-s"]), fmt_row(["---"] * 3)]
    for r in lim["layouts"]:
        s.append(fmt_row([r["layout"], f"{r['images_per_s']:.2f}", f"{r['images_per_cpu_s']:.2f}"]))
    s.append(f"\nBest (the limit): **{lim['best']['layout']}: {lim['best']['images_per_s']:.2f} images/s**, over {lim['images']} images.\n")
    return s


def radar_time_split(results: dict, cores: int) -> list[str]:
    s = ["## RADAR: where the kit's time goes\n",
         "Triton's own counters over each run, per text request (entry = the `radar` Python model, which waits on its BLS "
         "calls; classifier = `radar_classifier`, per execution). Stub I/O is the Python backends' input+output copying.\n",
         fmt_row(["input", "load", "entry queue ms", "entry compute ms", "classifier queue ms", "classifier ms / execution", "avg batch", "stub I/O ms / text", "server CPU", "client CPU"]),
         fmt_row(["---"] * 10)]
    for r in results["sweeps"]:
        if r["family"] == "kit":
            s.append(fmt_row([r["input"], r["load"], *triton_profile(r), pct(r["server_cpu_s"], r["wall_s"], cores), pct(r["client_cpu_s"], r["wall_s"], cores)]))
    return s


def ocr_profile(row: dict) -> list[str]:
    """Per image: entry queue and compute; each network's compute (its requests' executions) and the queues; the recogniser's batching."""
    t = row.get("triton") or {}
    images = t.get("ocr", {}).get("requests")
    if not images or not all(t.get(m, {}).get("requests") for m in ("ocr_det", "ocr_rec")):
        return ["-"] * 9
    ms = lambda ns: f"{ns / images / 1e6:.0f}"  # noqa: E731
    net = lambda m: t[m]["compute_infer"] / t[m]["requests"] * t[m]["executions"] if t.get(m, {}).get("requests") else 0  # noqa: E731
    rec = t["ocr_rec"]
    return [ms(t["ocr"]["queue"]), ms(t["ocr"]["compute_infer"]), ms(net("ocr_det")), ms(net("ocr_cls")), ms(net("ocr_rec")),
            ms(sum(t.get(m, {}).get("queue", 0) for m in ("ocr_det", "ocr_cls", "ocr_rec"))),
            f"{rec['requests'] / images:.1f}", f"{rec['executions'] / images:.1f}", f"{rec['inferences'] / rec['executions']:.1f}"]


def ocr_time_split(results: dict, cores: int) -> list[str]:
    s = ["## OCR: where the kit's time goes\n",
         "Triton's own counters over each run, per image (ms). Entry = the `ocr` Python model: decoding, pre- and "
         "post-processing, and waiting on its BLS calls. det / cls / rec = compute of `ocr_det`, `ocr_cls`, `ocr_rec` "
         "(each execution once, however many requests it merged); network queue = the time the image's requests waited "
         "in the three networks' queues, summed. The networks' compute against the entry's compute shows what the "
         "entry spends on its own work and on BLS.\n",
         fmt_row(["input", "load", "entry queue", "entry compute", "det", "cls", "rec", "network queue",
                  "rec requests / image", "rec executions / image", "crops / rec execution", "server CPU", "client CPU"]),
         fmt_row(["---"] * 13)]
    for r in results["sweeps"]:
        if r["family"] == "kit":
            s.append(fmt_row([r["input"], r["load"], *ocr_profile(r), pct(r["server_cpu_s"], r["wall_s"], cores), pct(r["client_cpu_s"], r["wall_s"], cores)]))
    return s


def radar_extras(out_dir: Path) -> list[str]:
    s = []
    tune = out_dir / "tune.json"
    if tune.is_file():
        s.append(tune_section(json.loads(tune.read_text())))
    if ANALYSIS.is_file():
        s.append("\n## RADAR: analysis\n")
        s.append(ANALYSIS.read_text().strip())
    return s


def radar_sections(results: dict, out_dir: Path, report_dir: Path) -> str:
    return sections(results, out_dir, report_dir, RADAR)


def tune_section(tune: dict) -> str:
    committed = load_profile("cpu")["models"]
    agrees = all(committed.get(model) == settings for model, settings in tune["winner"]["profile"].items())
    status = ("the committed `model_repository/profiles/cpu.json` holds it" if agrees else
              "**the committed `model_repository/profiles/cpu.json` differs from it** (edited after the search, or a dry run)")
    s = [f"\n## RADAR: layout search (`make tune`)\n",
         f"At {tune['concurrency']} clients, p99 budget {tune['p99_budget_ms'] / 1000:.0f} s for the entry model end to end; "
         f"run {tune['started']}. Winner: **{tune['winner']['setting']}**; {status}.\n",
         fmt_row(["stage", "setting", "texts/s", "p99 s", "within budget"]), fmt_row(["---"] * 5)]
    for r in tune["trials"]:
        s.append(fmt_row([r["stage"], r["setting"], f"{r['throughput']:.2f}", sec(r['p99_ms']), "yes" if r["within_budget"] else "no"]))
    return "\n".join(s)


@dataclass(frozen=True)
class Workload:
    """What differs between the workloads' reports; the rest is one code path."""

    title: str  # section prefix: "## RADAR: ..."
    prefix: str  # plot file names
    request: str  # what one request carries
    item: str  # what throughput is counted in (the limit too): rows' f"{item}s_per_s"
    model_note: str
    inputs: Callable[[dict], str]
    load_note: str
    workers_note: str
    verdicts: Callable[[dict, str], list[str]]
    limit: Callable[[dict], list[str]]
    time_split: Callable[[dict, int], list[str]]
    extras: Callable[[Path], list[str]]

    @property
    def key(self) -> str:
        return f"{self.item}s_per_s"


RADAR = Workload(
    "RADAR", "radar", "text", "chunk", "the exported RADAR classifier", radar_inputs_line,
    "Triton over gRPC, the baselines as JSON POSTs (perf_analyzer's `openai` service kind). Same texts, same chunking and "
    "length buckets (the CPU profile's bucket count, unless a kit variant's label says otherwise), same ONNX model; a chunk is counted as requests/s x the mean chunks per text of the input set.",
    "The kit's count is `radar_classifier`'s instances.", verdicts, radar_limit, radar_time_split, radar_extras)
OCR = Workload(
    "OCR", "ocr", "image", "image", "PP-OCRv4 detector and recogniser and the mobile angle classifier from rapidocr-onnxruntime 1.4.4, exported by export.ocr",
    ocr_inputs_line,
    "Triton over gRPC with the image's base64 text in `IMAGE`, the baseline as JSON POSTs of `{\"image\": \"<base64>\"}` "
    "(perf_analyzer's `openai` service kind): both decode the same base64. Same images, the same "
    "pipeline (kit.ocr, with the committed `ocr` parameters) and the same three ONNX models in every target.",
    "The kit's count is the instances of `ocr_det` (and of `ocr_rec`, which each variant gives as many).",
    ocr_verdicts, ocr_limit, ocr_time_split, lambda _out_dir: [])
WORKLOADS = {"radar": RADAR, "ocr": OCR}


def split_sections(text: str) -> list[str]:
    return re.split(r"(?m)^(?=## )", text)[1:]


def owned_by(section: str, w: Workload) -> bool:
    return re.match(rf"## {w.title}\b", section) is not None


def kept_sections(existing: str) -> str:
    """Other owners' "## " sections (neither RADAR's nor OCR's), unchanged."""
    return "".join(p for p in split_sections(existing) if not any(owned_by(p, w) for w in WORKLOADS.values())).strip()


def write_report(results: dict, out_dir: Path, path: Path) -> None:
    """This run's workload's sections, the other workload's sections as they were, then other owners' sections."""
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = path.read_text() if path.is_file() else ""
    this = WORKLOADS[results.get("workload", "radar")]
    generated = []
    for w in WORKLOADS.values():
        if w is this:
            generated.append(sections(results, out_dir, path.parent, w))
        else:
            old = "".join(p for p in split_sections(existing) if owned_by(p, w)).strip()
            generated.append(old + "\n" if old else "")
    kept = kept_sections(existing)
    head = ("# Performance results\n\nGenerated by `python -m perf.sweep` (`make perf`, `make perf-ocr`) from each run's results.json "
            "(named in its section); do not edit the RADAR or OCR sections by hand.\n\n")
    path.write_text(head + "\n".join(g for g in generated if g) + ("\n" + kept + "\n" if kept else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    write_report(json.loads(args.results.read_text()), args.results.parent, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
