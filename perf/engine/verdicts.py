"""The comparisons the issue's targets are made of, judged from a run's rows: the kit against the
limit, against each baseline at the same load, and failed requests."""

from __future__ import annotations

from perf.engine.tables import sec
from perf.engine.workload import Verdict, Workload


def kit_by_clients(rows: dict[str, list[dict]]) -> dict[int, dict]:
    return {r["concurrency"]: r for r in rows.get("kit", []) if r["concurrency"]}


def versus_limit(w: Workload, kit: dict[int, dict], limit: float, clients: list[int], share: float = 0.9) -> list[Verdict]:
    return [
        Verdict(f"{c} clients, kit >= {share} x limit", kit[c][w.key] / limit >= share, f"{kit[c][w.key] / limit:.2f} x")
        for c in clients
        if c in kit
    ]


def versus_baselines(w: Workload, rows: dict[str, list[dict]], kit: dict[int, dict], with_setting: bool = False) -> list[Verdict]:
    """Kit against each baseline at each load: throughput at least theirs and a p99 no worse."""
    out = []
    for family, family_rows in rows.items():
        if family == "kit":
            continue
        for r in family_rows:
            k = kit.get(r["concurrency"])
            if not k or not r["concurrency"]:
                continue
            setting = f" ({r['setting']})" if with_setting else ""
            name = f"kit vs {w.family_title(family)}{setting} at {r['concurrency']} clients"
            if r["error"] or k["error"]:
                out.append(Verdict(name, False, f"a run failed (kit: {k['error'] or 'ok'}; {family}: {r['error'] or 'ok'})"))
                continue
            out.append(
                Verdict(
                    name,
                    k["throughput"] >= r["throughput"] and k["p99_ms"] <= r["p99_ms"],
                    f"throughput {k['throughput'] / r['throughput']:.2f} x, p99 {sec(k['p99_ms'])} s vs {sec(r['p99_ms'])} s",
                )
            )
    return out


def no_failures(name: str, rows: list[dict]) -> Verdict:
    failed = [r for r in rows if r["error"]]
    detail = (
        f"{len(failed)} of {len(rows)} points failed, e.g. {failed[0]['error']}"
        if failed
        else f"none of {len(rows)} points failed"
    )
    return Verdict(name, not failed, detail)


def none_failed_at(w: Workload, rows: dict[str, list[dict]], clients: int) -> list[Verdict]:
    """No failed request at `clients` clients, per target family."""
    return [
        Verdict(
            f"zero failed requests at {clients} clients, {w.family_title(family)}", not r["error"], r["error"] or "none failed"
        )
        for family, family_rows in rows.items()
        for r in family_rows
        if r["concurrency"] == clients
    ]
