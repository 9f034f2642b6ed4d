"""The reports' plots (matplotlib, written as PNG beside the report)."""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def throughput_vs_p99(
    series: dict[str, list[dict]], key: str, limits: dict[str, float], ylabel: str, title: str, path: Path
) -> None:
    """One curve per series through its loads, each point annotated with its clients; a grey line per limit."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, rows in series.items():
        ax.plot([r["p99_ms"] / 1000 for r in rows], [r[key] for r in rows], marker="o", label=label)
        for r in rows:
            ax.annotate(
                f"c={r['concurrency']}", (r["p99_ms"] / 1000, r[key]), fontsize=7, textcoords="offset points", xytext=(3, 3)
            )
    for (label, limit), style in zip(limits.items(), itertools.cycle(("--", ":", "-."))):
        ax.axhline(limit, color="grey", linestyle=style, label=label)
    ax.set_xlabel("p99 latency (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="lower right")
    save(fig, path)


def versus_clients(series: dict[str, list[dict]], key: str, ylabel: str, title: str, path: Path) -> None:
    """Throughput and p99 latency against the number of clients, one line per series."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for label, rows in series.items():
        left.plot([r["concurrency"] for r in rows], [r[key] for r in rows], marker="o", label=label)
        right.plot([r["concurrency"] for r in rows], [r["p99_ms"] / 1000 for r in rows], marker="o", label=label)
    left.set(xlabel="clients", ylabel=ylabel, title=title)
    right.set(xlabel="clients", ylabel="p99 latency (s)", title="p99 latency")
    left.legend()
    save(fig, path)


def settings_scatter(groups: dict[str, list[dict]], key: str, ylabel: str, title: str, path: Path) -> None:
    """Each probed setting as a point of throughput against p99, one colour per group."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, rows in groups.items():
        ax.scatter([r["p99_ms"] / 1000 for r in rows], [r[key] for r in rows], label=label)
        for r in rows:
            ax.annotate(r["setting"], (r["p99_ms"] / 1000, r[key]), fontsize=6, textcoords="offset points", xytext=(3, 2))
    ax.set_xlabel("p99 latency (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    save(fig, path)


def memory_bars(table: dict[str, dict[int, int]], title: str, path: Path) -> None:
    """Peak resident memory (MiB in, GiB drawn) per group and worker count."""
    counts = sorted({n for by_workers in table.values() for n in by_workers})
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(1, len(table))
    for i, (label, by_workers) in enumerate(table.items()):
        xs = [x + (i - len(table) / 2) * width * 0.9 for x in range(len(counts))]
        ax.bar(xs, [by_workers.get(n, 0) / 1024 for n in counts], width * 0.9, label=label)
    ax.set_xticks(range(len(counts)), [f"{n} worker(s) / instance(s)" for n in counts])
    ax.set_ylabel("peak resident memory (GiB)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    save(fig, path)
