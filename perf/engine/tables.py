"""Markdown tables and the figures in their cells, for every workload's report."""

from __future__ import annotations

from collections.abc import Callable

from perf.engine.workload import Verdict, Workload


def by_family(rows: list[dict], input_name: str) -> dict[str, list[dict]]:
    """The rows of one input set, by target family, in the order they were measured."""
    out: dict[str, list[dict]] = {}
    for row in rows:
        if row["input"] == input_name:
            out.setdefault(row["family"], []).append(row)
    return out


def graphs(results: dict) -> list[str | None]:
    """The graphs a run measured, in its order (perf.engine.spec.graph_runs); [None] for a run of one."""
    return list(results["limits"]) if "limits" in results else [None]


def limit_of(results: dict, graph: str | None) -> dict | None:
    """The limit measured on `graph` (None: the run's one limit); None where the workload has no limit."""
    return results["limits"][graph] if graph is not None else results.get("limit")


def with_graph(text: str, row: dict) -> str:
    """`text`, and the row's graph in a run over `graphs`."""
    return text + (f" [{row['graph']}]" if "graph" in row else "")


def target_name(w: Workload, row: dict) -> str:
    """A row's target family, and its graph in a run over `graphs`."""
    return with_graph(w.family_title(row["family"]), row)


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


def kit_time_table(results: dict, headers: list[str], cells: Callable[[dict], list[str]]) -> list[str]:
    """Each kit point: its input (and graph) and load, the workload's split of Triton's counters, server and client CPU."""
    cores = results["machine"]["cores"]
    rows = [
        [
            with_graph(r["input"], r),
            r["load"],
            *cells(r),
            pct(r["server_cpu_s"], r["wall_s"], cores),
            pct(r["client_cpu_s"], r["wall_s"], cores),
        ]
        for r in results["sweeps"]
        if r["family"] == "kit"
    ]
    return table(["input", "load", *headers, "server CPU", "client CPU"], rows)


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
