"""The engine's pure parts: a sweep fitted into a deadline, the targets judged from a spec's goals (in turns too),
specs that extend others and suites of them, a run in rounds reported as medians, and the exit status."""

import asyncio
import json

import pytest

from perf.__main__ import failed, main
from perf.engine.budget import Budget
from perf.engine.load import Window, run_window
from perf.engine.report import collapsed
from perf.engine.spec import load_spec
from perf.engine.tables import held_by, runner_figures
from perf.engine.targets import variant_profile
from perf.engine.verdicts import judge
from perf.workloads.pixels import RESNET
from perf.workloads.radar import RADAR
from perf.workloads.radar_limit import flops_per_chunk

# --- the closed loop's window ---------------------------------------------------------------------------------


def test_a_window_shorter_than_an_answer_still_measures_one_and_failures_end_it_too():
    """A design slower than the whole window (a busy machine, a short test sweep) is measured, not read as 0/s."""
    window, snapshot = Window(concurrency=4, warmup_s=0.01, duration_s=0.01), lambda: {}

    async def slow(index: int) -> None:
        await asyncio.sleep(0.2)

    async def failing(index: int) -> None:
        await asyncio.sleep(0.05)
        raise ConnectionError("refused")

    latencies, errors, _, _ = asyncio.run(run_window(slow, window, snapshot))
    assert len(latencies) >= 1 and all(seconds >= 0.2 for seconds in latencies) and not errors
    latencies, errors, _, _ = asyncio.run(run_window(failing, window, snapshot))
    assert not latencies and sum(errors.values()) >= window.concurrency


# --- budget ---------------------------------------------------------------------------------------------------


def test_a_budget_counts_down_to_the_deadline_less_its_reserve():
    now = [100.0]
    budget = Budget(deadline=200.0, reserve_s=10.0, clock=lambda: now[0])
    assert budget.left() == 90.0 and budget.allows(90.0) and not budget.allows(91.0)
    now[0] = 195.0
    assert budget.left() == -5.0 and not budget.allows(0.0)
    assert Budget(None).allows(1e9)


def test_a_point_is_estimated_from_its_window():
    assert Budget(None).point_s(Window(8, 2.0, 3.0)) == 6.0


# --- goals ------------------------------------------------------------------------------------------------------


def row(family, clients, rate, setting="s", p99=1000.0, p50=500.0, error=None, **tags):
    return {
        "family": family,
        "setting": setting,
        "input": "long",
        "load": f"c={clients}",
        "concurrency": clients,
        "throughput": rate / 2,
        "chunks_per_s": rate,
        "images_per_s": rate,
        "p50_ms": p50,
        "p99_ms": p99,
        "error": error,
        **tags,
    }


def results(sweeps, goals, limit=None, **extra):
    best = {"layout": "x", "batch": 8, "chunks_per_s": limit}
    spec = {"sweep": {"input": "long"}, "goals": goals, **extra.pop("spec", {})}
    return {"spec": spec, "sweeps": sweeps, "probes": [], **({"limit": {"best": best}} if limit else {}), **extra}


def by_target(verdicts):
    return {v.target: v for v in verdicts}


def test_each_family_counts_at_its_best_setting_and_a_factor_and_p99_are_judged():
    sweeps = [
        row("kit", 64, 850, p99=90, setting="entry=8"),
        row("kit", 64, 700, setting="entry=16"),
        row("kit", 256, 900, p99=300),
        row("flask", 64, 200),
        row("flask", 256, 400),
        row("batcher", 64, 700, p99=95),
        row("batcher", 256, 700, p99=250),
    ]
    goals = {
        "limit": [{"share": 0.8, "clients": [64]}, {"share": 0.9, "clients": [64]}],
        "versus": [
            {"over": "flask", "factor": 3, "clients": [64, 256]},
            {"over": "batcher", "factor": 1.2, "clients": [64, 256], "p99": "below"},
        ],
        "no_failures": {"clients": [256]},
    }
    v = by_target(judge(RADAR, results(sweeps, goals, limit=1000.0)))
    assert v["64 clients, kit >= 0.8 x limit"].met and not v["64 clients, kit >= 0.9 x limit"].met
    assert v["kit (Triton) >= 3 x Flask at 64 clients"].met
    assert not v["kit (Triton) >= 3 x Flask at 256 clients"].met  # 2.25 x
    assert v["kit (Triton) >= 1.2 x FastAPI + asyncio batcher at 64 clients"].met
    assert not v["kit (Triton) >= 1.2 x FastAPI + asyncio batcher at 256 clients"].met  # p99 300 > 250
    assert v["zero failed requests at 256 clients, Flask"].met


def runner_row(family="kit", clients=64, rate=500.0, forward_s=0.8, busy_s=0.9):
    """A kit point with its runner's counters over a 1 s window: 10 executions of 2 runs, 12 chunks each (2 padding)."""
    metrics = {
        f'kit_runner_stage_seconds_{kind}{{model="radar_classifier",stage="{stage}"}}': value
        for stage, seconds in (("tensors", 0.01), ("h2d", 0.02), ("forward", forward_s), ("d2h", 0.01))
        for kind, value in (("sum", seconds), ("count", 20))
    }
    metrics |= {
        'kit_runner_runs_total{graph="true",model="radar_classifier",shape="8x72",warmed="true"}': 16,
        'kit_runner_runs_total{graph="false",model="radar_classifier",shape="3x72",warmed="false"}': 4,
        'kit_runner_rows_total{model="radar_classifier",rows="asked"}': 120,
        'kit_runner_rows_total{model="radar_classifier",rows="padding"}': 20,
    }
    triton = {"radar_classifier": {"executions": 10, "execution_compute_infer": busy_s * 1e9}}
    return row(family, clients, rate, metrics=metrics, triton=triton, wall_s=1.0, workers=1)


def test_a_kit_points_runner_figures_split_its_executions_and_name_what_holds_it():
    f = runner_figures(runner_row(), "radar_classifier")
    assert (f["runs_per_execution"], f["rows_per_execution"]) == (2.0, 12.0)
    assert f["padding"] == pytest.approx(20 / 140) and f["from_graphs"] == pytest.approx(0.8)
    assert f["unwarmed"] == {"3x72": 4} and f["stage_ms"]["forward"] == pytest.approx(40.0)
    assert f["time"] == pytest.approx(
        {"waiting for work": 0.1, "the forward pass": 0.8, "tensors and copies": 0.04, "the stub around the runner": 0.06}
    )
    assert held_by(f).startswith("held by the forward pass (80% of the runner's time)")
    idle = runner_figures(runner_row(forward_s=0.2, busy_s=0.3), "radar_classifier")
    assert held_by(idle).startswith("held by waiting for work (70%")
    assert runner_figures(row("kit", 64, 500), "radar_classifier") is None  # a runner without these metrics


def test_a_missed_target_names_what_holds_the_kit_and_the_control_is_judged_apart():
    sweeps = [runner_row(rate=500.0), runner_row("control", rate=900.0), row("batcher", 64, 600.0, p99=2000)]
    goals = {"limit": {"share": 0.8, "clients": [64]}, "versus": [{"over": "batcher", "factor": 1.5, "clients": [64]}]}
    v = by_target(judge(RADAR, results(sweeps, goals, limit=1000.0)))
    assert v["64 clients, kit >= 0.8 x limit"].detail.startswith("0.50 x; held by the forward pass")
    assert "held by the forward pass" in v["kit (Triton) >= 1.5 x FastAPI + asyncio batcher at 64 clients"].detail


def test_the_best_limit_is_judged_against_the_layout_the_goal_names():
    layouts = [
        {"layout": "eager", "way": "eager", "batch": 64, "chunks_per_s": 4000.0},
        {"layout": "eager", "way": "eager", "batch": 128, "chunks_per_s": 5000.0},
        {"layout": "graphs", "way": "kit", "batch": 128, "chunks_per_s": 7000.0},
    ]
    run = results([], {"limit_over": {"way": "eager", "batch": 64, "factor": 1.5}})
    run["limit"] = {"layouts": layouts, "best": layouts[2]}
    (verdict,) = judge(RADAR, run)
    assert verdict.met and verdict.detail.startswith("1.75 x (graphs at batch 128: 7000 vs 4000 chunks/s)")
    (missing,) = judge(RADAR, results([], {"limit_over": {"way": "eager", "batch": 32, "factor": 1.5}}))
    assert not missing.met


def test_roberta_large_costs_about_44_gflop_a_chunk_at_72_tokens():
    config = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24}
    assert flops_per_chunk(config, [72]) == pytest.approx(44.0e9, rel=0.01)
    mean = (flops_per_chunk(config, [48]) + flops_per_chunk(config, [104])) / 2
    assert flops_per_chunk(config, [48, 104]) == pytest.approx(mean)  # the mean over the chunks' padded lengths


def test_what_was_not_measured_or_failed_is_never_met():
    sweeps = [row("kit", 256, 900, setting="a"), row("kit", 256, 10, error="2 requests failed", setting="b")]
    goals = {
        "limit": {"share": 0.8, "clients": [64]},
        "versus": [{"over": "flask", "clients": [64]}],
        "no_failures": {"clients": [256]},
    }
    v = judge(RADAR, results(sweeps, goals, limit=1000.0))
    assert not any(x.met for x in v if x.target != "zero failed requests at 256 clients, kit (Triton) (a)")
    assert by_target(v)["zero failed requests at 256 clients, kit (Triton) (b)"].detail == "2 requests failed"


def test_settings_are_judged_against_each_other_and_an_empty_window_is_no_win():
    sweeps = [
        row("kit", 1, 100, setting="none"),
        row("kit", 1, 96, setting="cost"),
        row("kit", 32, 100, setting="none"),
        row("kit", 32, 160, setting="cost"),
        row("kit", 70, 0.0, setting="none"),
        row("kit", 70, 15, setting="cost"),
    ]
    goals = {
        "settings": [
            {"of": "cost", "over": "none", "factor": 1.5, "from_clients": 32},
            {"of": "cost", "over": "none", "factor": 0.95},
        ]
    }
    v = by_target(judge(RESNET, results(sweeps, goals)))
    assert v["cost >= 1.5 x none at 32 clients"].met and v["cost >= 0.95 x none at 1 clients"].met
    assert not v["cost >= 1.5 x none at 70 clients"].met and "no request" in v["cost >= 1.5 x none at 70 clients"].detail


def test_a_setting_is_named_by_a_part_of_its_label_that_only_it_has():
    long_label = "1x1 delay=2000us buckets=5 entry=4x16 in-flight=4 ragged door-workers="
    sweeps = [row("door", 64, 100, setting=long_label + "1"), row("door", 64, 150, setting=long_label + "2")]
    goals = {"settings": [{"family": "door", "of": "door-workers=2", "over": "door-workers=1", "factor": 1.6}]}
    v = by_target(judge(RADAR, results(sweeps, goals)))["door-workers=2 >= 1.6 x door-workers=1 at 64 clients"]
    assert not v.met and "1.50" in v.detail


def test_in_turns_each_round_is_set_against_its_own_limit_and_the_median_is_judged():
    sweeps = [row("kit", 16, rate, round=r) for r, rate in enumerate((3.0, 3.6, 2.7))]
    sweeps += [row("door", 16, rate, round=r, p50=p50) for r, (rate, p50) in enumerate(((2.9, 501), (3.5, 501.5), (2.5, 530)))]
    limits = [{"round": r, "graph": None, "best": {"chunks_per_s": rate}} for r, rate in enumerate((3.2, 3.8, 3.0))]
    goals = {
        "limit": {"share": 0.95, "clients": [16]},
        "versus": [
            {"of": "door", "over": "kit", "factor": 0.95},
            {"of": "door", "over": "kit", "p50_added_ms": 2, "clients": [16]},
        ],
    }
    v = by_target(judge(RADAR, results(sweeps, goals, limit=3.2, limit_rounds=limits, spec={"rounds": 3})))
    assert v["16 clients, kit >= 0.95 x limit"].detail.startswith("0.94 x (median of 3 rounds: 0.94, 0.95, 0.90)")
    door = v["kit through the door >= 0.95 x kit (Triton) at 16 clients"]
    assert door.met and "median of 3 rounds" in door.detail
    assert v["kit through the door adds <= 2 ms to kit (Triton)'s p50 at 16 clients"].met  # median of 1, 1.5, 30 ms


def test_a_failed_accuracy_check_or_a_missing_one_is_not_met():
    goals = {"accuracy": {"max_abs_diff": 0.01}}
    check = {"requests": 16, "max_abs_diff": 0.02, "reference": "r"}
    assert not judge(RADAR, results([], goals, accuracy=check))[0].met
    assert not judge(RADAR, results([], goals))[0].met
    assert judge(RADAR, results([], goals, accuracy={**check, "max_abs_diff": 0.001}))[0].met


def test_a_workload_without_goals_in_its_spec_keeps_its_own():
    sweeps = [row("kit", 16, 3.0), row("kit", 64, 3.0), row("kit", 256, 3.0)]
    committed = results(sweeps, None, limit=3.2)
    committed["spec"].pop("goals")
    assert [v.target for v in judge(RADAR, committed)] == [
        "16 clients, kit >= 0.9 x limit",
        "64 clients, kit >= 0.9 x limit",
        "zero failed requests at 256 clients, kit (Triton)",
    ]


# --- specs, rounds, exit status ----------------------------------------------------------------------------------


def test_a_spec_extends_another_key_by_key_and_a_suite_names_its_parts(tmp_path):
    (tmp_path / "base.json").write_text(
        json.dumps({"model": "m", "window": {"warmup_s": 1, "duration_s": 2}, "targets": {"kit": [{}]}})
    )
    (tmp_path / "child.json").write_text(json.dumps({"extends": str(tmp_path / "base.json"), "window": {"duration_s": 5}}))
    child = load_spec(str(tmp_path / "child.json"))
    assert child["window"] == {"warmup_s": 1, "duration_s": 5} and child["model"] == "m"
    suite = load_spec("gpu-quick")
    assert list(suite["suite"]) == ["radar"] and suite["suite"]["radar"]["path"].endswith("gpu-quick.json#radar")
    both = {"suite": {"radar": {"extends": "quick"}, "resnet": {"extends": "resnet-quick"}}}
    (tmp_path / "both.json").write_text(json.dumps(both))
    (tmp_path / "one.json").write_text(json.dumps({"extends": str(tmp_path / "both.json"), "suite": {"resnet": None}}))
    one = load_spec(str(tmp_path / "one.json"))  # `"resnet": null` leaves out the part it would extend
    assert list(one["suite"]) == ["radar"] and one["suite"]["radar"]["sweep"] == load_spec("quick")["sweep"]


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"targets": {"kit": [{}]}, "rounds": 2, "probe": {}}, "use one of them"),
        ({"targets": {"kit": [{}]}, "requests": {}}, "closed-loop `window`s"),
        ({"targets": {"kit": [{}]}, "probe": {}}, "closed-loop `window`s"),
    ],
)
def test_a_sweep_that_cannot_run_its_targets_is_refused(tmp_path, spec, message):
    (tmp_path / "bad.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=message):
        load_spec(str(tmp_path / "bad.json"))


def test_a_run_in_rounds_reports_each_point_as_its_median_with_its_spread():
    sweeps = [row("kit", 16, rate, round=r, p99=p99) for r, (rate, p99) in enumerate(((3.0, 900), (3.6, 1200), (2.7, 800)))]
    [point] = collapsed({"spec": {"rounds": 3}, "sweeps": sweeps}, RADAR)
    assert point["chunks_per_s"] == 3.0 and point["p99_ms"] == 900 and point["rounds"] == 3 and point["spread"] == (2.7, 3.6)
    assert collapsed({"spec": {}, "sweeps": sweeps}, RADAR) == sweeps


def test_the_sweep_fails_when_a_step_failed_or_was_skipped():
    clean = {"errors": [], "skipped": []}
    assert not failed([clean])
    assert failed([clean, {**clean, "skipped": [{"what": "resnet", "why": "3 s left"}]}])
    assert failed([{**clean, "errors": [{"what": "starting kit", "error": "ServerError()"}]}])


def test_a_sweep_spec_may_name_the_workloads_models_by_role():
    """perf/specs/model-pixels.json fits any spec's classifier of pixels: `@entry` is the workload's entry, whatever
    its name, and the variant is labelled by the entry's merge policy."""
    profile = variant_profile(RESNET, {"@entry": {"parameters": {"merge_policy": "paddle"}}, "@workers": {"instances": 3}})
    assert profile["models"][RESNET.entry]["parameters"]["merge_policy"] == "paddle"
    assert profile["models"][RESNET.workers]["instances"] == 3
    assert RESNET.label(profile["models"]) == "paddle"
    assert RESNET.label(variant_profile(RESNET, {"@entry": {"ragged_batch": False}})["models"]) == "triton"
    assert load_spec("model-pixels")["targets"]["kit"][0] == {"@entry": {"parameters": {"merge_policy": "none"}}}


def test_a_shipped_pipeline_is_refused_by_the_model_sweep_with_what_measures_it(capsys):
    """`--model` sends random tensors or a module's EXAMPLE: the OCR entries' images are sent to their own workload."""
    assert main(["sweep", "--model", "ocr"]) == 2
    error = capsys.readouterr().err
    assert "ocr is one of the kit's own pipelines" in error and "make perf-ocr" in error
