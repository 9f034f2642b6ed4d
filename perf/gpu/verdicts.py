"""Issue 13's targets, judged from a GPU run's rows (pure: the rows as results.json holds them).

RADAR on the GPU: the kit >= 0.8 x the offline FP16 limit in chunks/s at 64 clients; >= 3 x Flask per request
and >= 1.2 x the asyncio batcher at 64 and 256 clients, with a p99 below the batcher's; no failed request at
256 clients. ResNet-50 on mixed shapes: the cost rule >= 1.5 x no batching from 32 clients on, and never slower
than no batching, which is judged within the run-to-run noise of one short window (NOISE).

The kit and the batcher each count at their best measured setting at that load (`radar` instances for the
kit, BATCH_SIZE_MAX x BATCH_TIMEOUT for the batcher), as a deployment would be tuned.
"""

from __future__ import annotations

from perf.engine.workload import Verdict

CHUNKS, IMAGES = "chunks_per_s", "images_per_s"
LIMIT_CLIENTS, LIMIT_SHARE = 64, 0.8
BASELINE_CLIENTS = (64, 256)
FLASK_FACTOR, BATCHER_FACTOR = 3.0, 1.2
FAILURE_CLIENTS = 256
RESNET_FACTOR, RESNET_FROM = 1.5, 32
NOISE = 0.05
NOT_MEASURED = "not measured (skipped or failed: see the run's skipped steps and errors)"


def best_by_clients(rows: list[dict], key: str) -> dict[int, dict]:
    """Per load, the row with the highest throughput among those without failed requests (a failed one if all failed)."""
    rank = lambda row: (row["error"] is not None, -row[key])  # noqa: E731
    best: dict[int, dict] = {}
    for row in rows:
        held = best.get(row["concurrency"])
        if held is None or rank(row) < rank(held):
            best[row["concurrency"]] = row
    return best


def ratio_verdict(name: str, kit: dict | None, other: dict | None, key: str, factor: float, p99: bool = False) -> Verdict:
    if kit is None or other is None:
        return Verdict(name, False, NOT_MEASURED)
    if kit["error"] or other["error"]:
        return Verdict(name, False, f"a point failed (kit: {kit['error'] or 'ok'}; other: {other['error'] or 'ok'})")
    if not kit[key] or not other[key]:
        return Verdict(name, False, f"a point completed no request inside its window ({kit[key]:.1f} vs {other[key]:.1f})")
    times = kit[key] / other[key]
    detail = f"{times:.2f} x ({kit[key]:.1f} vs {other[key]:.1f} {key.replace('_per_s', '/s')})"
    met = times >= factor
    if p99:
        detail += f", p99 {kit['p99_ms']:.0f} ms vs {other['p99_ms']:.0f} ms"
        met = met and kit["p99_ms"] < other["p99_ms"]
    return Verdict(name, met, detail)


def radar_verdicts(kit: list[dict], flask: list[dict], batcher: list[dict], limit: float | None) -> list[Verdict]:
    k, f, b = best_by_clients(kit, CHUNKS), best_by_clients(flask, CHUNKS), best_by_clients(batcher, CHUNKS)
    at_limit = k.get(LIMIT_CLIENTS)
    if at_limit is None or not limit:
        out = [Verdict(f"kit >= {LIMIT_SHARE} x the offline limit at {LIMIT_CLIENTS} clients", False, NOT_MEASURED)]
    else:
        share = at_limit[CHUNKS] / limit
        detail = f"{share:.2f} x ({at_limit[CHUNKS]:.1f} vs {limit:.1f} chunks/s)" + (
            f"; {at_limit['error']}" if at_limit["error"] else ""
        )
        out = [
            Verdict(
                f"kit >= {LIMIT_SHARE} x the offline limit at {LIMIT_CLIENTS} clients",
                share >= LIMIT_SHARE and not at_limit["error"],
                detail,
            )
        ]
    for clients in BASELINE_CLIENTS:
        out.append(
            ratio_verdict(
                f"kit >= {FLASK_FACTOR:g} x Flask per request at {clients} clients",
                k.get(clients),
                f.get(clients),
                CHUNKS,
                FLASK_FACTOR,
            )
        )
        out.append(
            ratio_verdict(
                f"kit >= {BATCHER_FACTOR:g} x the asyncio batcher at {clients} clients, p99 below its",
                k.get(clients),
                b.get(clients),
                CHUNKS,
                BATCHER_FACTOR,
                p99=True,
            )
        )
    at_failures = [r for r in kit if r["concurrency"] == FAILURE_CLIENTS]
    failed = [f"{r['setting']}: {r['error']}" for r in at_failures if r["error"]]
    out.append(
        Verdict(
            f"zero failed requests at {FAILURE_CLIENTS} clients (every kit layout)",
            bool(at_failures) and not failed,
            "; ".join(failed) if failed else (f"none failed in {len(at_failures)} layout(s)" if at_failures else NOT_MEASURED),
        )
    )
    return out


def resnet_verdicts(rows: list[dict]) -> list[Verdict]:
    by = {(r["setting"], r["concurrency"]): r for r in rows}
    loads = sorted({c for s, c in by if s == "none"} & {c for s, c in by if s == "cost"})
    out = [
        ratio_verdict(
            f"cost rule >= {RESNET_FACTOR:g} x no batching at {c} clients",
            by[("cost", c)],
            by[("none", c)],
            IMAGES,
            RESNET_FACTOR,
        )
        for c in loads
        if c >= RESNET_FROM
    ]
    never = [ratio_verdict("", by[("cost", c)], by[("none", c)], IMAGES, 1 - NOISE) for c in loads]
    out.append(
        Verdict(
            f"cost rule never slower than no batching (>= {1 - NOISE:g} x: one window's noise) at any of {loads or 'no'} clients",
            bool(never) and all(v.met for v in never),
            "; ".join(f"{c}: {v.detail}" for c, v in zip(loads, never)) or NOT_MEASURED,
        )
    )
    if not any(c >= RESNET_FROM for c in loads):
        out.insert(0, Verdict(f"cost rule >= {RESNET_FACTOR:g} x no batching from {RESNET_FROM} clients", False, NOT_MEASURED))
    return out


def instances_needed(kit: list[dict], clients: int, within: float = 0.95) -> dict | None:
    """At `clients`, the fewest `radar` instances whose chunks/s is within `within` of the best layout's: past it,
    more Python entry instances no longer raise throughput, so the Python side is no longer the bottleneck."""
    rows = sorted((r for r in kit if r["concurrency"] == clients and not r["error"]), key=lambda r: r["radar_instances"])
    if not rows:
        return None
    best = max(r[CHUNKS] for r in rows)
    needed = next(r for r in rows if r[CHUNKS] >= within * best)
    return {
        "clients": clients,
        "instances": needed["radar_instances"],
        "within": within,
        "by_instances": {r["radar_instances"]: {CHUNKS: r[CHUNKS], "gpu": r.get("gpu", {})} for r in rows},
        "saturated": needed["radar_instances"] < rows[-1]["radar_instances"],
    }
