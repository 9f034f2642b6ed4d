"""The targets a report judges, from the spec's `goals` (else the workload's own `goals`): data, not code, so
that one engine judges the CPU sweeps, the runs in turns and the GPU run, each with its own numbers.

    "goals": {
      "limit": {"share": 0.9, "clients": [16, 64]},                 # or "from_clients": 8; or a list of such
      "versus": [{"over": "baselines", "p99": "no_worse"},           # the kit against each baseline family
                 {"over": "flask", "factor": 3, "clients": [64, 256]},
                 {"of": "door", "over": "kit", "factor": 0.95, "clients": [16, 64]},
                 {"of": "door", "over": "kit", "p50_added_ms": 2, "clients": [1]}],
      "settings": [{"of": "cost", "over": "none", "factor": 1.5, "from_clients": 32}],
      "no_failures": {"clients": [256]},                             # or {"everywhere": true}
      "cpu": [{"of": "door", "max_ms": 1.0, "below": "baselines", "clients": [64, 256]}],  # server CPU per item
      "limit_over": {"way": "eager", "batch": 64, "factor": 1.5},     # the best limit over one of its layouts
      "accuracy": {"max_abs_diff": 0.01}
    }

A family counts at its best setting at each load (the one with the highest throughput among those without a
failed request), as a deployment would be tuned; `per_setting` judges every setting of the other family. In a
run with `rounds`, each comparison is made within each round and the median ratio is judged; the detail gives
every round's. Each judgement is on the sweep's input set. Where the kit misses
the limit or another family at a load, the detail names what holds it, from its runner's figures where it has them
(perf.engine.tables.held_by).
"""

from __future__ import annotations

import statistics

from perf.engine.tables import held_by, runner_figures, sec
from perf.engine.workload import Verdict, Workload

NOT_MEASURED = "not measured (skipped or failed: see the run's skipped steps and errors)"


def goals_of(w: Workload, results: dict) -> dict:
    return results["spec"].get("goals", w.goals)


def rank(row: dict, key: str) -> tuple:
    return (row["error"] is None, row[key])


def best_per_round(rows: list[dict], key: str) -> dict:
    """Per round (None outside rounds), the best of `rows`."""
    out: dict = {}
    for row in rows:
        held = out.get(row.get("round"))
        if held is None or rank(row, key) > rank(held, key):
            out[row.get("round")] = row
    return out


class Rows:
    """The swept rows one judgement looks at: the sweep's input."""

    def __init__(self, w: Workload, results: dict):
        self.w, self.key = w, w.key
        sweep_input = results["spec"]["sweep"]["input"]
        self.rows = [r for r in results["sweeps"] if r["input"] == sweep_input]
        self.loads = sorted({r["concurrency"] for r in self.rows if r["concurrency"]})

    def of(self, family: str, clients: int, setting: str | None = None) -> dict:
        """The family's best row per round at `clients`; `setting`: that setting's only."""
        rows = [
            r
            for r in self.rows
            if r["family"] == family and r["concurrency"] == clients and (setting is None or r["setting"] == setting)
        ]
        return best_per_round(rows, self.key)

    def settings(self, family: str) -> list[str]:
        return list(dict.fromkeys(r["setting"] for r in self.rows if r["family"] == family))

    def families(self) -> list[str]:
        return list(dict.fromkeys(r["family"] for r in self.rows))


def loads_of(goal: dict, measured: list[int]) -> list[int]:
    if "clients" in goal:
        return [c for c in goal["clients"] if c in measured]
    return [c for c in measured if c >= goal.get("from_clients", 0)]


def rounds_detail(ratios: list[float]) -> str:
    return f" (median of {len(ratios)} rounds: {', '.join(f'{r:.2f}' for r in ratios)})" if len(ratios) > 1 else ""


def ratio_verdict(name: str, a: dict, b: dict, key: str, factor: float, p99: str | None = None) -> Verdict:
    """`a` over `b` (rows per round) >= factor, judged on the median over the rounds both measured."""
    both = [r for r in a if r in b]
    if not both:
        return Verdict(name, False, NOT_MEASURED)
    failed = [f"{row['family']}: {row['error']}" for r in both for row in (a[r], b[r]) if row["error"]]
    if failed:
        return Verdict(name, False, f"a point failed ({'; '.join(failed)})")
    if not all(a[r][key] and b[r][key] for r in both):
        return Verdict(name, False, "a point completed no request inside its window")
    ratios = [a[r][key] / b[r][key] for r in both]
    times = statistics.median(ratios)
    last = both[-1]
    unit = key.replace("_per_s", "/s")
    detail = f"{times:.2f} x ({a[last][key]:.2f} vs {b[last][key]:.2f} {unit}){rounds_detail(ratios)}"
    met = times >= factor
    if p99:
        worse = [a[r]["p99_ms"] > b[r]["p99_ms"] if p99 == "no_worse" else a[r]["p99_ms"] >= b[r]["p99_ms"] for r in both]
        detail += f", p99 {sec(a[last]['p99_ms'])} s vs {sec(b[last]['p99_ms'])} s"
        met = met and sum(worse) <= len(worse) // 2
    return Verdict(name, met, detail)


def limit_verdicts(rows: Rows, results: dict, goal: dict) -> list[Verdict]:
    """The kit's best setting at each load over the limit (of its own round, in turns)."""
    share, key = goal["share"], rows.key
    lim = results.get("limit")
    per_round = {x["round"]: x["best"][key] for x in results.get("limit_rounds", [])}
    if not per_round and lim:
        per_round = {None: lim["best"][key]}
    out = []
    for c in loads_of(goal, rows.loads):
        kit = rows.of("kit", c)
        name = f"{c} clients, kit >= {share} x limit"
        both = [r for r in kit if r in per_round]
        if not both:
            out.append(Verdict(name, False, NOT_MEASURED))
            continue
        ratios = [kit[r][key] / per_round[r] for r in both]
        times = statistics.median(ratios)
        error = next((kit[r]["error"] for r in both if kit[r]["error"]), None)
        detail = f"{times:.2f} x{rounds_detail(ratios)}" + (f"; {error}" if error else "")
        met = times >= share and not error
        out.append(Verdict(name, met, detail + ("" if met else holding(rows.w, kit[both[-1]]))))
    return out


def holding(w: Workload, row: dict) -> str:
    """What holds a kit point that missed, from its runner's figures; nothing where it has none."""
    figures = runner_figures(row, w.workers)
    return f"; {held_by(figures)}" if figures else ""


def versus_verdicts(rows: Rows, goal: dict) -> list[Verdict]:
    of, factor, p99 = goal.get("of", "kit"), goal.get("factor", 1.0), goal.get("p99")
    w, key = rows.w, rows.key
    over = [f for f in rows.families() if f in w.baselines] if goal["over"] == "baselines" else [goal["over"]]
    out = []
    for family in over:
        settings = rows.settings(family) if goal.get("per_setting") else [None]
        for setting in settings:
            label = f"{w.family_title(family)}" + (f" ({setting})" if setting else "")
            for c in loads_of(goal, rows.loads):
                a, b = rows.of(of, c), rows.of(family, c, setting)
                if "p50_added_ms" in goal:
                    out.append(p50_verdict(w, of, label, c, a, b, goal["p50_added_ms"]))
                    continue
                compared = f"{w.family_title(of)} >= {factor:g} x {label}" if factor != 1 else f"{of} vs {label}"
                v = ratio_verdict(f"{compared} at {c} clients", a, b, key, factor, p99)
                out.append(v if v.met or of != "kit" or not a else Verdict(v.target, v.met, v.detail + holding(w, a[max(a)])))
    return out


def p50_verdict(w: Workload, of: str, label: str, clients: int, a: dict, b: dict, limit_ms: float) -> Verdict:
    name = f"{w.family_title(of)} adds <= {limit_ms:g} ms to {label}'s p50 at {clients} client{'s' * (clients > 1)}"
    both = [r for r in a if r in b]
    if not both or any(a[r]["error"] or b[r]["error"] for r in both):
        return Verdict(name, False, NOT_MEASURED if not both else "a point failed")
    added = [a[r]["p50_ms"] - b[r]["p50_ms"] for r in both]
    median = statistics.median(added)
    return Verdict(
        name,
        median <= limit_ms,
        f"{median:.2f} ms" + (f" (rounds: {', '.join(f'{x:.2f}' for x in added)})" if len(added) > 1 else ""),
    )


def setting_named(rows: Rows, family: str, name: str) -> str:
    """The family's setting `name` is, or the one setting whose label contains it ("door-workers=2")."""
    settings = rows.settings(family)
    if name in settings:
        return name
    matches = [s for s in settings if name in s]
    return matches[0] if len(matches) == 1 else name


def settings_verdicts(rows: Rows, goal: dict) -> list[Verdict]:
    """One setting of a family (the kit unless `family` says) over another at each load (ResNet's cost rule over
    no batching; the door on two workers over one)."""
    factor, family = goal.get("factor", 1.0), goal.get("family", "kit")
    of, over = setting_named(rows, family, goal["of"]), setting_named(rows, family, goal["over"])
    return [
        ratio_verdict(
            f"{goal['of']} >= {factor:g} x {goal['over']} at {c} clients",
            rows.of(family, c, of),
            rows.of(family, c, over),
            rows.key,
            factor,
        )
        for c in loads_of(goal, rows.loads)
    ]


def cpu_ms(row: dict, key: str) -> float:
    """Milliseconds of server CPU (every process of the target) per item served."""
    items = row[key] * row["wall_s"]
    return 1000 * row["server_cpu_s"] / items if items else float("inf")


def cpu_verdicts(rows: Rows, goal: dict) -> list[Verdict]:
    """The server CPU one family spends per item, at most `max_ms` and (`below`) at most each baseline's."""
    of, w, out = goal.get("of", "kit"), rows.w, []
    others = [f for f in rows.families() if f in w.baselines] if goal.get("below") == "baselines" else listed(goal.get("below"))
    for c in loads_of(goal, rows.loads):
        mine = rows.of(of, c)
        if not mine:
            out.append(Verdict(f"{w.family_title(of)} CPU per {w.item} at {c} clients", False, NOT_MEASURED))
            continue
        spent = statistics.median(cpu_ms(r, rows.key) for r in mine.values())
        if "max_ms" in goal:
            name = f"{w.family_title(of)} spends <= {goal['max_ms']:g} ms of server CPU per {w.item} at {c} clients"
            out.append(Verdict(name, spent <= goal["max_ms"], f"{spent:.2f} ms"))
        for family in others:
            theirs = rows.of(family, c)
            name = f"{w.family_title(of)} spends no more server CPU per {w.item} than {w.family_title(family)} at {c} clients"
            if not theirs:
                out.append(Verdict(name, False, NOT_MEASURED))
                continue
            cost = statistics.median(cpu_ms(r, rows.key) for r in theirs.values())
            out.append(Verdict(name, spent <= cost, f"{spent:.2f} vs {cost:.2f} ms"))
    return out


def failure_verdicts(w: Workload, rows: Rows, results: dict, goal: dict) -> list[Verdict]:
    if goal.get("everywhere"):
        out = []
        for family in rows.families():
            points = [r for r in results["probes"] + results["sweeps"] if r["family"] == family]
            failed = [r for r in points if r["error"]]
            detail = (
                f"{len(failed)} of {len(points)} points failed, e.g. {failed[0]['error']}"
                if failed
                else f"none of {len(points)} points failed"
            )
            out.append(Verdict(f"zero failed requests in probes and sweep, {w.family_title(family)}", not failed, detail))
        return out

    def name(r: dict) -> str:  # a family measured at several settings, or in several rounds, names each point
        setting = f" ({r['setting']})" if len(rows.settings(r["family"])) > 1 else ""
        turn = f", round {r['round'] + 1}" if r.get("round") else ""
        return f"{w.family_title(r['family'])}{setting}{turn}"

    return [
        Verdict(f"zero failed requests at {c} clients, {name(r)}", not r["error"], r["error"] or "none failed")
        for c in goal["clients"]
        for r in rows.rows
        if r["concurrency"] == c
    ]


def limit_over_verdict(w: Workload, results: dict, goal: dict) -> Verdict:
    """The best limit over the limit's layout that has every other key of the goal (its `way` and `batch`, say):
    what the best way of running the model buys over one."""
    layout = {k: v for k, v in goal.items() if k != "factor"}
    name = f"the best limit >= {goal['factor']:g} x the limit's {', '.join(f'{k} {v}' for k, v in layout.items())}"
    lim = results.get("limit")
    base = next((r for r in lim["layouts"] if layout.items() <= r.items()), None) if lim else None
    if base is None:
        return Verdict(name, False, NOT_MEASURED)
    best, times = lim["best"], lim["best"][w.key] / base[w.key]
    detail = f"{times:.2f} x ({best['layout']} at batch {best['batch']}: {best[w.key]:.0f} vs {base[w.key]:.0f} {w.item}s/s)"
    return Verdict(name, times >= goal["factor"], detail)


def accuracy_verdict(results: dict, goal: dict) -> Verdict:
    name = f"served results within {goal['max_abs_diff']:g} of the direct reference"
    check = results.get("accuracy")
    if not check:
        return Verdict(name, False, NOT_MEASURED)
    diff = check["max_abs_diff"]
    return Verdict(
        name,
        diff <= goal["max_abs_diff"],
        f"max abs difference {diff:.3g} over {check['requests']} requests ({check['reference']})",
    )


def listed(goal: dict | list | None) -> list[dict]:
    """A goal given once (a dict) or at several levels (a list: the issue's target and the project's own)."""
    return [] if goal is None else goal if isinstance(goal, list) else [goal]


def judge(w: Workload, results: dict) -> list[Verdict]:
    """Every goal of the run."""
    goals, rows, out = goals_of(w, results), Rows(w, results), []
    for goal in listed(goals.get("limit")):
        out += limit_verdicts(rows, results, goal)
    for goal in goals.get("versus", []):
        out += versus_verdicts(rows, goal)
    for goal in goals.get("settings", []):
        out += settings_verdicts(rows, goal)
    if "no_failures" in goals:
        out += failure_verdicts(w, rows, results, goals["no_failures"])
    for goal in goals.get("cpu", []):
        out += cpu_verdicts(rows, goal)
    if "limit_over" in goals:
        out.append(limit_over_verdict(w, results, goals["limit_over"]))
    if "accuracy" in goals:
        out.append(accuracy_verdict(results, goals["accuracy"]))
    return out
