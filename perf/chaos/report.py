"""A chaos run's verdict and report: what must hold whatever the run's counts (no wrong answer, nothing lost, no error
but a clear retryable refusal, the kit ready and whole at the end, memory flat in all and process by process, nothing
of a dead stub left behind), and the tables perf/RELIABILITY.md takes from a run."""

from __future__ import annotations

import time

from perf.chaos.watch import Watch
from perf.engine.tables import table

# Memory is flat when the total resident memory of the last fifth of the run is within this of the first fifth's
# (medians): a restart frees the stubs' heaps and a flood grows them for a while, so the bound is on the trend.
GROWTH = 1.25
SLACK_MB = 64.0
# And each process's by role (the door, tritonserver, each model's stubs), within GROWTH and this: the total's slack
# would hide one process's growth as large as the door's whole heap.
ROLE_SLACK_MB = 32.0
CLIENT_KINDS = ("grpc", "door")  # the closed-loop clients' kinds end so; floods and bad input are the faults'


def wait_ready(watch: Watch, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(watch.ready()):
            return True
        time.sleep(0.5)
    return False


def faults_figures(done: list[dict], watch: Watch, start: float) -> list[dict]:
    """Each fault in the order it came, with the seconds until Triton and the door were both ready again."""
    out = []
    for fault in sorted(done, key=lambda f: f["started"]):
        started = fault.pop("started")
        out.append({**fault, "ready_again_s": watch.ready_again(started, started + fault["took_s"] + 10.0)})
    return out


def supervisor_figures(events: list[tuple[float, str]], start: float) -> dict:
    lines = [(round(t - start, 1), line) for t, line in events]
    return {"restarts": sum("restarting" in line for _, line in lines), "events": lines}


def problems(figures: dict) -> list[str]:
    """Why the run failed; none when it passed."""
    found = []
    for kind, counts in figures["requests"].items():
        for outcome in ("wrong", "failed", "lost"):
            if counts[outcome]:
                example = next(iter(counts.get("messages", {}).get(outcome, {})), "")
                found.append(f"{kind}: {counts[outcome]} {outcome}, e.g. {example}")
        if kind.endswith(CLIENT_KINDS) and not counts["right"]:
            found.append(f"{kind}: no right answer")
    for fault in figures["faults"]:
        if "error" in fault:
            found.append(f"fault {fault['kind']} at {fault['at_s']} s could not be injected: {fault['error']}")
        if fault.get("broken") and fault.get("deployed"):
            found.append(f"the broken version {fault['version']} was deployed")
    found += [f"{name} still running at the end" for name in figures["unfinished_faults"]]
    if not figures["ready_at_end"]:
        found.append(f"the kit was not ready at the end: {figures['why_not_ready']}")
    serves = figures["radar_serves"]
    if isinstance(serves, str):
        found.append(f"the server did not say which versions of radar serve at the end: {serves}")
    elif len(serves) != 1:
        found.append(f"radar serves versions {serves} at the end, not one")
    if figures["supervisor_failure"]:
        found.append(f"the supervisor gave up: {figures['supervisor_failure']}")
    left = figures["left_behind"]
    if left["stubs_running"] or left["shm_regions"]:
        found.append(f"left behind after the run: {left}")
    memory = figures["memory"]
    if not memory:
        found.append("too few memory samples to judge")
    else:
        total = memory["total"]
        if total["last_mb"] > total["first_mb"] * GROWTH + SLACK_MB:
            found.append(f"resident memory grew from {total['first_mb']} to {total['last_mb']} MB")
        found += [
            f"{name}'s resident memory grew from {role['first_mb']} to {role['last_mb']} MB"
            for name, role in memory["by_role"].items()
            if grew(role)
        ]
    return found


def grew(role: dict) -> bool:
    """Whether one role's memory grew: its last fifth above its first fifth's bound and above the most it held in the
    run's first half. A role of a moment (a crash's helper) has no first fifth to grow from; a model whose stubs a
    deploy replaced early has a first fifth of fresh stubs (seen: radar_texts 57 -> 109 MB on a loaded machine, after
    276 MB in the first half), and ending below a mark it already reached is no growth, while a leak ends at its
    highest."""
    first, last = role["first_mb"], role["last_mb"]
    return bool(first) and last > first * GROWTH + ROLE_SLACK_MB and last > role["halves_max_mb"][0]


def markdown(figures: dict, command: str) -> str:
    """The run's tables, for perf/RELIABILITY.md."""
    rows = []
    for kind, c in figures["requests"].items():
        refused = ", ".join(f"{status}: {n:,}" for status, n in sorted(c["refused_by_status"].items())) or "0"
        rows.append([kind, f"{c['sent']:,}", f"{c['right']:,}", refused, c["wrong"], c["failed"], c["lost"], c["slowest_s"]])
    lines = [
        f"`{command}`: {figures['seconds']:.0f} s, seed {figures['seed']}, {sum(figures['clients'].values())} clients, "
        f"{len(figures['faults'])} faults, {figures['supervisor']['restarts']} restarts by the supervisor.",
        "",
        *table(["requests", "sent", "right", "refused (by status)", "wrong", "failed", "lost", "slowest (s)"], rows),
        "",
        *table(
            ["at (s)", "fault", "what", "took (s)", "ready again after (s)"],
            [[f["at_s"], f["kind"], what(f), f["took_s"], f["ready_again_s"]] for f in figures["faults"]],
        ),
    ]
    memory = figures["memory"]
    if memory:
        roles = [[name, m["first_mb"], m["last_mb"], m["max_mb"], *m["halves_max_mb"]] for name, m in memory["by_role"].items()]
        total = memory["total"]
        shm, left = memory["shm_live_mb"], memory["shm_left_behind"]
        lines += [
            "",
            *table(
                ["resident MB", "first fifth (median)", "last fifth (median)", "most", "most, first half", "most, second half"],
                [*roles, ["all", *total.values(), "", ""]],
            ),
            "",
            f"Flat means the last fifth's median within {GROWTH:g} x the first fifth's + {SLACK_MB:g} MB in all, and + "
            f"{ROLE_SLACK_MB:g} MB for each process by role, or at most the most it held in the run's first half.",
            "",
            f"`/dev/shm` of the live stubs: {shm['first']} MB at first, {shm['last']} MB at the end, {shm['max']} MB at most; "
            f"of dead stubs, before the supervisor's restart removed them: at most {left['max_regions']} regions "
            f"({left['max_mb']} MB), {left['at_end']} at the end; after the run: {figures['left_behind']}.",
        ]
    verdict = figures["problems"]
    lines += ["", "Verdict: " + ("passed." if not verdict else "failed: " + "; ".join(verdict))]
    return "\n".join(lines) + "\n"


def what(fault: dict) -> str:
    """A fault's particulars, briefly."""
    skip = {"kind", "at_s", "took_s", "ready_again_s"}
    return "; ".join(f"{key} {value}" for key, value in fault.items() if key not in skip).replace("|", "/")
