"""Layout search for the kit (Triton's Model Analyzer idea, aimed at the entry model end to end).

    python -m perf.tune --spec tune        # make tune

Searches classifier instances x threads, then its batch cap (several 1-thread instances share the
queue evenly only when one execution cannot take all of it), then ragged batches on or off, then
max_queue_delay, then the number of length buckets, then entry-model instances, one axis at a time
from the best so far (a coordinate search: each trial restarts Triton on a generated repository
variant). A trial scores its `radar` throughput at the spec's concurrency; trials whose p99 exceeds
the budget lose to any that meet it. The winner's RADAR entries are written into
model_repository/profiles/cpu.json (other models' entries are kept); the spec's `base` (perf-only
settings every trial shares) is not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from kit.adapters.artifacts import text_pipeline
from kit.control.configs import REPO_ROOT, SOURCE, template
from perf.engine.perf_analyzer import Load, warm_up
from perf.engine.point import measure
from perf.engine.spec import load_spec
from perf.engine.targets import make_target, merged
from perf.workloads.radar import RADAR, radar_inputs


def batch_cap(cap: int) -> dict:
    """The classifier capped at `cap` rows, with the source's preferred sizes that fit."""
    preferred = template("text/classifier", "radar_classifier").dynamic_batching.preferred_batch_size
    return {"radar_classifier": {"max_batch_size": cap, "preferred_batch_size": [b for b in preferred if b <= cap]}}


STAGES = {
    "layout": lambda v: {"radar_classifier": {"instances": v[0], "threads": v[1]}},
    "max_batch_size": batch_cap,
    "ragged_batch": lambda v: {"radar_classifier": {"ragged_batch": v}},
    "max_queue_delay_us": lambda v: {"radar_classifier": {"max_queue_delay_microseconds": v}},
    "bucket_count": lambda v: {"radar": {"parameters": {"bucket_count": str(v)}}},
    "entry_instances": lambda v: {"radar_texts": {"instances": v}},
    "entry_batch": lambda v: {"radar_texts": {"max_batch_size": v}},
}


def score(row: dict, budget_ms: float) -> tuple:
    """Within budget first, then throughput; a failed trial scores lowest."""
    if row["error"]:
        return (False, -1.0)
    return (row["p99_ms"] <= budget_ms, row["throughput"] if row["p99_ms"] <= budget_ms else -row["p99_ms"])


def search(spec: dict, work: Path) -> dict:
    model_dir = (REPO_ROOT / spec["model"]).resolve()
    inputs = radar_inputs(
        work / "inputs", spec["inputs"][0], text_pipeline(model_dir, RADAR.settings(model_dir, work / "kit-settings"))
    )
    budget, load = spec["p99_budget_ms"], Load(spec["requests"], concurrency=spec["concurrency"])
    best_setting, best_row, trials, seen = {}, None, [], {}
    for stage, values in spec["search"].items():
        stage_best = None
        for value in values:
            setting = merged(best_setting, STAGES[stage](value))
            target = make_target(RADAR, "kit", merged(spec.get("base", {}), setting), model_dir, work)
            if target.label in seen:  # the incumbent: measured in an earlier stage
                row = seen[target.label]
            else:
                target.start()
                try:
                    warm_up(target, inputs, spec.get("warmup", 8), work / "pa", "tune-warmup")
                    row = measure(target, inputs, load, work / "pa", f"tune-{len(trials)}")
                finally:
                    target.stop()
                seen[target.label] = row
            trials.append(
                {
                    "stage": stage,
                    "value": value,
                    "setting": target.label,
                    "throughput": row["throughput"],
                    "p99_ms": row["p99_ms"],
                    "error": row["error"],
                    "within_budget": not row["error"] and row["p99_ms"] <= budget,
                }
            )
            if stage_best is None or score(row, budget) > score(stage_best[1], budget):
                stage_best = (setting, row)
        best_setting, best_row = stage_best
    winner = make_target(RADAR, "kit", best_setting, model_dir, work)
    return {
        "concurrency": spec["concurrency"],
        "p99_budget_ms": budget,
        "started": time.strftime("%Y-%m-%d %H:%M"),
        "model": spec["model"],
        "trials": trials,
        "winner": {
            "setting": winner.label,
            "profile": {model: winner.placements[model] for model in RADAR.models},
            "roles": {model: winner.models[model].role for model in RADAR.models},
            "throughput": best_row["throughput"],
            "p99_ms": best_row["p99_ms"],
        },
    }


# What a text model's role takes of the winner (every text spec's models are placed so); the rest is RADAR's own entry.
ROLE_KEYS = ("instances", "threads", "graph", "max_batch_size", "ragged_batch", "parameters")


def write_profile(placements: dict, roles: dict, source: Path = SOURCE) -> Path:
    """The winner into the CPU profile: each RADAR model's layout into its role, what is RADAR's own into its entry."""
    path = source / "profiles" / "cpu.json"
    profile = json.loads(path.read_text())
    for model, placement in placements.items():
        profile["roles"][roles[model]] = {k: v for k, v in placement.items() if k in ROLE_KEYS}
        own = {k: v for k, v in placement.items() if k not in ROLE_KEYS}
        profile["models"].pop(model, None)
        if own:
            profile["models"][model] = own
    head = {k: v for k, v in profile.items() if k not in ("roles", "models")}
    text = json.dumps(head, indent=2)[:-2]
    for section in ("roles", "models"):
        lines = [f"    {json.dumps(name)}: {json.dumps(entry)}" for name, entry in profile[section].items()]
        text += f',\n  "{section}": {{\n' + ",\n".join(lines) + "\n  }"
    text += "\n}\n"
    json.loads(text)  # one entry per line, as the file is written by hand
    path.write_text(text)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="tune")
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT / "perf" / "results" / "radar" / "tune.json",
        help="the RADAR report shows the search from here",
    )
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "build" / "perf" / "tune")
    parser.add_argument("--dry-run", action="store_true", help="do not write the profile")
    args = parser.parse_args(argv)
    result = search(load_spec(args.spec), args.work)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"winner: {result['winner']['setting']} ({result['winner']['throughput']:.2f} texts/s, "
        f"p99 {result['winner']['p99_ms'] / 1000:.1f} s)"
    )
    if not args.dry_run:
        print(f"wrote {write_profile(result['winner']['profile'], result['winner']['roles'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
