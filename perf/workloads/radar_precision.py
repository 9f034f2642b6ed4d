"""RADAR at several precisions in one run: the same limit, kit and baseline on each ONNX graph the
export writes (a spec's `graphs`: FP32 as torch exported it, fused, INT8), so that every served figure
is set against the limit of the graph it served, and the graphs' limits against each other.

The work per chunk stays equal within a graph (perf.engine.spec.graph_runs hands one file to the
kit, the baselines and the limit); across graphs it is what the precision changes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from perf.engine.tables import by_family, graphs, limit_of, sec, table
from perf.workloads.radar import Radar, limit_section


def per_load(rows: list[dict], loads: list[int], figure: Callable[[dict], str]) -> str:
    """One figure per load of the sweep, as "a / b / c"; a failed point reads "failed", a missing one "-"."""
    at = {r["concurrency"]: r for r in rows}
    return " / ".join("-" if c not in at else "failed" if at[c]["error"] else figure(at[c]) for c in loads)


class RadarPrecision(Radar):
    name, title = "radar-precision", "RADAR precision"
    graph_model = "radar_classifier"
    goals = {
        "limit": {"share": 0.95, "clients": [16, 64]},  # the issue: served >= 0.95 x the limit of the same graph
        "no_failures": {"clients": [256]},
        "graph_limits": {"fused": 1.1, "int8": 2.0},  # the issue: these graphs' limits over the first graph's (FP32)
    }

    def limit_rates(self, results: dict) -> dict[str, float]:
        """Each graph's limit in chunks/s, in the run's order (the first is the reference)."""
        return {g: limit_of(results, g)["best"][self.key] for g in graphs(results) if limit_of(results, g)}

    def graph_rows(self, results: dict, graph: str) -> dict[str, list[dict]]:
        """The swept rows of one graph on the sweep's input, by target family."""
        return by_family([r for r in results["sweeps"] if r["graph"] == graph], results["spec"]["sweep"]["input"])

    def sections(self, results: dict, out_dir: Path) -> list[str]:
        return (
            self.side_by_side(results)
            + [line for g in graphs(results) if limit_of(results, g) for line in limit_section(limit_of(results, g), g)]
            + self.time_section(results)
        )

    def side_by_side(self, results: dict) -> list[str]:
        """The graphs' limits against the first's, and each target per graph at every load of the sweep."""
        rates, files = self.limit_rates(results), results["spec"]["graphs"]
        first, loads = next(iter(rates)), results["spec"]["sweep"]["concurrency"]
        limits = [
            [g, f"`{files[g]}`", f"{rate:.2f}", f"{rate / rates[first]:.2f}", f"{limit_of(results, g)['best']['layout']}"]
            for g, rate in rates.items()
        ]
        served = [
            [
                g,
                self.family_title(family),
                per_load(rows, loads, lambda r: f"{r[self.key]:.2f}"),
                per_load(rows, loads, lambda r, rate=rate: f"{r[self.key] / rate:.2f}"),
                per_load(rows, loads, lambda r: sec(r["p99_ms"])),
                max(r["peak_rss_mb"] for r in rows),
                f"{sum(bool(r['error']) for r in rows)} of {len(rows)}",
            ]
            for g, rate in rates.items()
            for family, rows in self.graph_rows(results, g).items()
        ]
        clients = " / ".join(map(str, loads))
        return [
            "## Precisions side by side\n",
            f"The offline limit of each graph, and its ratio to the {first} graph's:\n",
            *table(["graph", "file", "limit chunks/s", f"x {first}", "best layout"], limits),
            f"\nEach target on each graph at {clients} clients ({results['spec']['sweep']['input']} texts); "
            "x limit: over the limit of the same graph.\n",
            *table(["graph", "target", "chunks/s", "x limit", "p99 s", "peak RSS MiB", "failed points"], served),
            "",
        ]

    def headline(self, results: dict) -> str:
        """The limits (and their ratios to the first), and the kit's best point over its graph's limit."""
        rates = self.limit_rates(results)
        first = next(iter(rates))
        limits = ", ".join(f"{g} {r:.2f}" + (f" ({r / rates[first]:.2f}x)" if g != first else "") for g, r in rates.items())
        kit = []
        for g, rate in rates.items():
            ok = [r for r in self.graph_rows(results, g).get("kit", []) if not r["error"]]
            kit.append(f"{max(r[self.key] for r in ok) / rate:.2f}" if ok else "-")
        return f"limits {limits} chunks/s; kit's best point {' / '.join(kit)} x its graph's limit"


RADAR_PRECISION = RadarPrecision()
