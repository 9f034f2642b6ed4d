"""The perf kit's tooling on tiny sweeps (RADAR, OCR and ResNet): it starts its servers, drives them with its closed
loop, reads what was measured and writes each workload's report and the index. Not a speed test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.control.configs import SOURCE
from kit.control.specs import ModelSpec
from kit.control.tasks import shipped_specs
from perf.__main__ import main as perf
from perf.engine.inputs import input_set
from perf.engine.load import Window
from perf.engine.report import write_index
from perf.engine.targets import make_target
from perf.workloads.ocr import OCR
from perf.workloads.pixels import RESNET
from perf.workloads.radar import RADAR
from tests.conftest import ARTIFACTS


def run_spec(out, spec: str | dict) -> dict:
    if isinstance(spec, dict):
        path = out / "spec.json"
        path.write_text(json.dumps(spec))
        spec = str(path)
    assert perf(["sweep", "--spec", spec, "--out", str(out), "--work", str(out / "work")]) == 0
    return json.loads((out / "results.json").read_text())


# What a report of a sweep with probes, baselines and a limit holds.
SECTIONS = ("## Results at each family's best setting", "## Targets", "## The limit", "## Where the kit's time goes", "## Memory")


def check_report(out, title: str, plots: tuple[str, ...]) -> str:
    report = (out / "REPORT.md").read_text()
    assert report.startswith(f"# {title} performance")
    assert [heading for heading in SECTIONS if heading not in report] == []
    for png in plots:
        assert (out / png).stat().st_size > 1000
    return report


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory, radar_artifacts):
    out = tmp_path_factory.mktemp("perf")
    return out, run_spec(out, "tiny")


# Two images (a page and a screenshot), one small kit layout and one uvicorn worker, 2-second windows: the OCR code
# paths end to end in well under a minute.
OCR_TINY = {
    "description": "Checks the OCR tooling, not the speed.",
    "workload": "ocr",
    "model": "artifacts/ocr",
    "inputs": [{"name": "mixed", "count": 2, "seed": 900}],
    "window": {"warmup_s": 1, "duration_s": 2},
    "probe": {"input": "mixed", "concurrency": 2},
    "sweep": {"input": "mixed", "concurrency": [2]},
    "extra": {},
    "limit": {"input": "mixed", "images": 2, "warmup": 1},
    "targets": {
        "kit": [{"ocr": {"instances": 1}, "ocr_det": {"instances": 1}, "ocr_rec": {"instances": 1}}],
        "uvicorn": [{"workers": 1}],
    },
}

# Two variants at 2 clients, 1 s of warm-up and 2 s measured: the closed loop and its counters.
RESNET_TINY = {
    "description": "Checks the closed-loop tooling, not the speed.",
    "workload": "resnet",
    "model": "artifacts/resnet50",
    "inputs": [{"name": "mixed", "count": 8, "seed": 0, "min_side": 174, "max_side": 274}],
    "window": {"warmup_s": 1, "duration_s": 2},
    "sweep": {"input": "mixed", "concurrency": [2]},
    "extra": {},
    "targets": {
        "kit": [
            {"resnet50": {"parameters": {"merge_policy": "none"}}},
            {"resnet50": {"parameters": {"merge_policy": "equal_shapes"}, "ragged_batch": False}},
        ]
    },
}


@pytest.fixture(scope="module")
def ocr_sweep(tmp_path_factory):
    if not (ARTIFACTS / "ocr" / "rec" / "model.onnx").is_file():
        pytest.fail(f"{ARTIFACTS / 'ocr'} has no exported models: run `make export` (make test does it)")
    out = tmp_path_factory.mktemp("perf-ocr")
    return out, run_spec(out, OCR_TINY)


@pytest.fixture(scope="module")
def resnet_sweep(tmp_path_factory):
    if not (ARTIFACTS / "resnet50" / "cost.json").is_file():
        pytest.fail(f"{ARTIFACTS / 'resnet50'} has no exported model and cost model: run `make export` (make test does it)")
    out = tmp_path_factory.mktemp("perf-resnet")
    return out, run_spec(out, RESNET_TINY)


def test_sweep_probes_and_measures_the_kit_and_a_baseline(tiny_sweep):
    _, results = tiny_sweep
    rows = results["probes"] + results["sweeps"]
    assert {r["family"] for r in rows} == {"kit", "flask"}
    for row in rows:
        assert row["error"] is None
        assert row["throughput"] > 0 and row["chunks_per_s"] > row["throughput"]
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert row["server_cpu_s"] > 0 and row["peak_rss_mb"] > 0  # a window's client CPU may be under a clock tick


def test_kit_runs_carry_tritons_time_split(tiny_sweep):
    _, results = tiny_sweep
    kit = next(r for r in results["sweeps"] if r["family"] == "kit")
    assert kit["triton"]["radar_texts"]["requests"] >= kit["requests"]  # counted when handed off, before the answer
    assert kit["triton"]["radar_classifier"]["inferences"] >= kit["requests"]  # at least one chunk per text


def test_limit_compares_one_session_with_parallel_sessions(tiny_sweep):
    _, results = tiny_sweep
    layouts = {r["layout"].split(" x ")[0] for r in results["limit"]["layouts"]}
    assert layouts >= {"1 session"}
    assert results["limit"]["best"]["chunks_per_s"] > 0


def test_report_has_tables_and_plots(tiny_sweep):
    out, _ = tiny_sweep
    check_report(out, "RADAR", ("radar_throughput_vs_p99.png", "radar_settings.png", "radar_memory.png"))


def test_a_failed_request_is_reported_as_an_error(tmp_path, radar_artifacts):
    target = make_target(RADAR, "flask", {}, ARTIFACTS / "radar", tmp_path)
    target.start()
    try:
        m = Window(1, 0.0, 0.5).measure(target, input_set("blank", ["   "], 1.0, "TEXT", [{"text": "   "}]))
    finally:
        target.stop()
    assert m["requests"] == 0 and "HTTP 400" in m["error"]


def test_ocr_sweep_measures_the_kit_and_uvicorn_in_images(ocr_sweep):
    _, results = ocr_sweep
    assert results["workload"] == "ocr"
    rows = results["probes"] + results["sweeps"]
    assert {r["family"] for r in rows} == {"kit", "uvicorn"}
    for row in rows:
        assert row["error"] is None
        assert row["throughput"] > 0 and row["images_per_s"] == row["throughput"]
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert row["server_cpu_s"] > 0 and row["peak_rss_mb"] > 0  # a window's client CPU may be under a clock tick
    kit = next(r for r in results["sweeps"] if r["family"] == "kit")
    assert set(kit["triton"]) == {"ocr", "ocr_det", "ocr_cls", "ocr_rec"}  # only the OCR models were loaded
    assert kit["triton"]["ocr"]["requests"] >= kit["requests"]
    # The CPU profile's entry runs the networks in its own process: the network models are loaded and idle.
    assert "engines=in_process" in kit["setting"] and kit["triton"]["ocr_det"]["requests"] == 0
    assert kit["setting"].startswith("det 1x1 rec 1x1")


def test_ocr_limit_compares_one_process_with_one_process_per_core(ocr_sweep):
    _, results = ocr_sweep
    layouts = [r["layout"] for r in results["limit"]["layouts"]]
    assert layouts[0].startswith("1 process x") and (len(layouts) == 1 or "processes x 1 thread" in layouts[1])
    assert results["limit"]["images"] == 2 and results["limit"]["best"]["images_per_s"] > 0


def test_ocr_report_has_its_sections_and_plots(ocr_sweep):
    out, _ = ocr_sweep
    report = check_report(out, "OCR", ("ocr_throughput_vs_p99.png", "ocr_settings.png", "ocr_memory.png"))
    assert "kit vs FastAPI + uvicorn (workers=1) at 2 clients" in report


def test_resnet_closed_loop_measures_every_variant_with_its_padding_counters(resnet_sweep):
    out, results = resnet_sweep
    assert not results["probes"] and [r["setting"] for r in results["sweeps"]] == ["none", "triton"]
    for row in results["sweeps"]:
        assert row["error"] is None and row["requests"] > 0 and row["throughput"] > 0
        assert 0 < row["p50_ms"] <= row["p99_ms"] and row["server_cpu_s"] > 0
        assert set(row["triton"]) == {"resnet50", "resnet50_backbone"}  # only the ResNet models were loaded
        assert row["images_per_run"] >= 1 and row["backbone_busy"] > 0
    none = results["sweeps"][0]
    assert none["padding_waste"] == 0 and none["mixed_runs"] == 0 and none["images_per_run"] == 1
    report = (out / "REPORT.md").read_text()
    assert report.startswith("# ResNet50 performance") and "## Throughput relative to no batching" in report
    assert (out / "resnet_vs_clients.png").stat().st_size > 1000


def test_index_links_each_workloads_own_report(tiny_sweep, ocr_sweep, resnet_sweep, tmp_path):
    runs = [(RADAR, tiny_sweep), (OCR, ocr_sweep), (RESNET, resnet_sweep)]
    index = write_index([(w, results, out / "REPORT.md") for w, (out, results) in runs], tmp_path / "RESULTS.md")
    lines = [line for line in index.read_text().splitlines() if line.startswith("| ") and "REPORT.md" in line]
    assert [line.split(" | ")[0] for line in lines] == ["| RADAR", "| OCR", "| ResNet50"]
    for (_, (out, _)), line in zip(runs, lines):
        link = line.split("](")[1].split(")")[0]
        assert (tmp_path / link).resolve() == (out / "REPORT.md").resolve()


# The kit and its front door in turns, with the limit in every round: two rounds of 2-second windows at 2 clients.
TURNS_TINY = {
    "description": "Checks the tooling of runs in turns, not the speed.",
    "model": "artifacts/radar",
    "inputs": [{"name": "long", "count": 8, "min_chars": 100, "max_chars": 800, "seed": 42}],
    "window": {"warmup_s": 1, "duration_s": 2},
    "rounds": 2,
    "sweep": {"input": "long", "concurrency": [2]},
    "extra": {},
    "limit": {"input": "long", "chunks": 8, "batch_sizes": [4]},
    "accuracy": {"requests": 3},
    "targets": {"kit": [{}], "door": [{}]},
    "goals": {"versus": [{"of": "door", "over": "kit", "factor": 0.01}], "accuracy": {"max_abs_diff": 1e-4}},
}


@pytest.fixture(scope="module")
def turns(tmp_path_factory, radar_artifacts):
    out = tmp_path_factory.mktemp("perf-turns")
    return out, run_spec(out, TURNS_TINY)


def test_in_turns_the_kit_and_its_door_answer_every_round_and_each_round_measures_the_limit(turns):
    out, results = turns
    rows = results["sweeps"]
    assert sorted((r["family"], r["round"]) for r in rows) == [("door", 0), ("door", 1), ("kit", 0), ("kit", 1)]
    for row in rows:
        assert row["error"] is None and row["requests"] > 0 and 0 < row["p50_ms"] <= row["p99_ms"]
    door = next(r for r in rows if r["family"] == "door")
    assert "door" in door["server_cpu_s_by_role"] and "tritonserver" in door["server_cpu_s_by_role"]
    # The door's texts reached Triton's texts model. Only bounds hold: the door may carry several texts in one request
    # (door.coalesce), and a Python model's statistics settle after its responses, so a window's count can miss or
    # take in the texts in flight at either end.
    in_flight = TURNS_TINY["sweep"]["concurrency"][0]
    assert 0 < door["triton"]["radar_texts"]["requests"] <= door["requests"] + 2 * in_flight
    assert [r["round"] for r in results["limit_rounds"]] == [0, 1] and results["limit"]["best"]["chunks_per_s"] > 0
    assert results["accuracy"]["requests"] == 3 and results["accuracy"]["max_abs_diff"] < 1e-4
    report = (out / "REPORT.md").read_text()
    assert "In turns: every target ran at once" in report and "## The limit in turns (2 rounds)" in report
    assert "kit through the door" in report and "-> **met**" in report and "-> **missed**" not in report


# The simulated H100 behind the kit, its door and a baseline: what the serving-overhead benchmark measures.
SIM_TINY = {
    "description": "Checks the simulated device's tooling, not the speed.",
    "model": "artifacts/radar",
    "profile": "perf/sim/sim-h100.json",
    "projection": {"cores": 16},
    "inputs": [{"name": "long", "count": 8, "min_chars": 100, "max_chars": 800, "seed": 42}],
    "window": {"warmup_s": 1, "duration_s": 2},
    "rounds": 1,
    "sweep": {"input": "long", "concurrency": [4]},
    "extra": {},
    "limit": {"input": "long", "batch_sizes": [4, 16]},
    "accuracy": {"requests": 3},
    "targets": {"kit": [{}], "door": [{}], "batcher": [{"batch_size_max": 16, "batch_timeout_ms": 5}]},
    "goals": {"accuracy": {"max_abs_diff": 1e-6}, "cpu": [{"of": "door", "max_ms": 1000.0}]},
}


def test_every_design_serves_the_same_simulated_device_and_the_report_projects_its_cost(tmp_path, radar_artifacts):
    results = run_spec(tmp_path, SIM_TINY)
    rows = results["sweeps"]
    assert {r["family"] for r in rows} == {"kit", "door", "batcher"}
    for row in rows:
        assert row["error"] is None and row["requests"] > 0
        assert 0 < row["device_busy_s"] <= row["wall_s"] * 1.05  # one simulated stream per instance or worker
    assert results["limit"]["best"]["layout"].startswith("simulated h100") and results["limit"]["best"]["chunks_per_s"] > 0
    assert results["accuracy"]["max_abs_diff"] < 1e-6  # served answers are the simulated device's own function
    report = (tmp_path / "REPORT.md").read_text()
    assert "## Serving cost: CPU per chunk and what 16 cores could feed" in report and "| door ms |" in report
    assert "spends <= 1000 ms of server CPU per chunk" in report and "-> **missed**" not in report


DESIGNS = ["batcher", "door", "flask", "kit", "uvicorn"]


def sweep_spec_model(tmp_path: Path, spec: ModelSpec, limit: dict, unit: str, designs=DESIGNS, **override) -> dict:
    """A short `python -m perf sweep --model NAME` of a spec's model: every design ran and answered (in `unit`/s)."""
    short = {"window": {"warmup_s": 0.5, "duration_s": 1.0}, "sweep": {"concurrency": [4]}, "limit": limit, **override}
    models = tmp_path / "no-specs" if spec.shipped else spec.path.parent  # a shipped spec is found by its name alone
    args = ["sweep", "--model", spec.name, "--models", str(models), "--out", str(tmp_path)]
    assert perf([*args, "--work", str(tmp_path / "work"), "--override", json.dumps(short)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert sorted({r["family"] for r in results["sweeps"]}) == designs
    failed = [(r["family"], r["error"]) for r in results["sweeps"] if r["error"] or not r[f"{unit}_per_s"] > 0]
    assert not failed, failed
    return results


def test_a_model_from_a_spec_is_benchmarked_against_the_hand_rolled_designs_by_name(tmp_path, brought_models):
    """`python -m perf sweep --model NAME`: every design on the spec's graph, its limit, its accuracy and its report,
    with nothing written for the model but its spec."""
    results = sweep_spec_model(tmp_path, brought_models["pooler"], {"batch_sizes": [1, 8]}, "rows")
    assert results["accuracy"]["max_abs_diff"] <= 1e-5 and results["limit"]["best"]["rows_per_s"] > 0
    report = (tmp_path / "REPORT.md").read_text()
    assert "FastAPI + asyncio batcher" in report and "## The limit" in report


@pytest.mark.parametrize(
    "model, compared",
    [("topics", "SCORES and CHUNK_SCORES"), ("science_score", "SCORE and CHUNK_SCORES"), ("radar", "SCORE and CHUNK_SCORES")],
)
def test_a_text_classifier_from_a_spec_is_benchmarked_as_radar_is_by_name(
    tmp_path, brought_models, radar_artifacts, model, compared
):
    """`python -m perf sweep --model NAME` on a text-classification spec, a user's or the kit's own (radar): RADAR's
    workload on its three models and its export, every design running the same chunks and graph, every label's served
    probabilities checked (one label's, where the spec names a `score_label`)."""
    spec = brought_models[model] if model in brought_models else shipped_specs(SOURCE)[model]
    results = sweep_spec_model(tmp_path, spec, {"chunks": 32, "batch_sizes": [8]}, "chunks")
    assert results["accuracy"]["compared"] == compared and results["accuracy"]["max_abs_diff"] <= 1e-4
    assert f"{model}_classifier" in (tmp_path / "REPORT.md").read_text()


@pytest.mark.parametrize("model, unit", [("reranker", "documents"), ("entities", "texts")])
def test_a_cross_encoder_and_a_token_classifier_from_a_spec_are_benchmarked_by_name(tmp_path, brought_models, model, unit):
    """`python -m perf sweep --model NAME` on a text-ranking and a token-classification spec: every design runs the
    kit's own pipeline (documents chunked beside a query, texts read in overlapping windows) with the kit variant's
    length buckets on the same graph, the limit in-process, and every served answer checked against it (a token
    classifier's entities by their types, words and offsets, equal, and their scores)."""
    results = sweep_spec_model(tmp_path, brought_models[model], {"batch_sizes": [8]}, unit)
    assert results["accuracy"]["max_abs_diff"] <= 1e-4 and results["limit"]["best"][f"{unit}_per_s"] > 0
    report = (tmp_path / "REPORT.md").read_text()
    assert "FastAPI + asyncio batcher" in report and "## The limit" in report and f"{model}_classifier" in report


def test_an_image_classifier_from_a_spec_is_benchmarked_against_the_hand_rolled_designs_by_name(tmp_path, brought_models):
    """`python -m perf sweep --model NAME` on an image-classification spec: the same PNG and JPEG pictures of many sizes
    to every design, each decoding and preprocessing them as the kit's pixels model does, the limit in-process, and
    every label's served probability checked against it."""
    results = sweep_spec_model(tmp_path, brought_models["scenes"], {"batch_sizes": [8], "passes": 1}, "images")
    check = results["accuracy"]
    assert check["compared"] == "SCORES" and check["max_abs_diff"] <= 1e-4 and check["top1_agreement"] == 1.0, check
    assert results["limit"]["best"]["images_per_s"] > 0 and not results["errors"]
    report = (tmp_path / "REPORT.md").read_text()
    assert "FastAPI + asyncio batcher" in report and "## The limit" in report and "scenes_pixels" in report
    assert "-> **met**" in report.split("served results within")[1].splitlines()[0]


def test_a_classifier_of_pixels_from_a_spec_is_benchmarked_against_the_hand_rolled_designs_by_name(tmp_path, brought_models):
    """`python -m perf sweep --model NAME` on an image-classification spec of pixels: the same images of many sizes to
    the kit (merged by its cost rule), the door and every hand-rolled design on the same graph, the limit in-process,
    and the served probabilities checked against the graph on each image alone."""
    cost_only = {"kit": [{"@entry": {"parameters": {"merge_policy": "cost"}}}]}
    results = sweep_spec_model(tmp_path, brought_models["shapes"], {"passes": 1}, "images", targets=cost_only)
    check = results["accuracy"]
    assert check["max_abs_diff"] <= 1e-4 and check["top1_agreement"] == 1.0, check
    assert results["limit"]["best"]["images_per_s"] > 0 and not results["errors"]
    report = (tmp_path / "REPORT.md").read_text()
    assert "FastAPI + asyncio batcher" in report and "## The limit" in report and "padding waste" in report


def test_a_pipeline_from_a_spec_is_benchmarked_against_the_hand_rolled_designs_by_name(tmp_path, brought_models):
    """`python -m perf sweep --model NAME` on a `pipeline` spec: every design runs the same module and graphs (texts
    in, two networks in turn), its limit in-process, and the served answers checked against the module's own."""
    results = sweep_spec_model(tmp_path, brought_models["words"], {"batch_sizes": [1, 8]}, "rows")
    assert results["accuracy"]["max_abs_diff"] <= 1e-5 and results["limit"]["best"]["rows_per_s"] > 0
    report = (tmp_path / "REPORT.md").read_text()
    assert "FastAPI + asyncio batcher" in report and "The module alone in this process" in report


def test_an_unbatched_pipeline_from_a_spec_is_benchmarked_against_the_hand_rolled_designs_by_name(tmp_path, brought_models):
    """`python -m perf sweep --model NAME` on an unbatched `pipeline` spec (peaks: a request is one signal of its
    EXAMPLE whole, its answer of its own size): every design but the batcher (no rows to concatenate) runs the same
    module, its limit runs requests at once in-process, and the served answers equal the module's own."""
    results = sweep_spec_model(tmp_path, brought_models["peaks"], {"batch_sizes": [1, 8]}, "requests", DESIGNS[1:])
    assert results["accuracy"]["max_abs_diff"] <= 1e-5 and results["limit"]["best"]["requests_per_s"] > 0
    report = (tmp_path / "REPORT.md").read_text()
    assert "asyncio batcher" not in report and "The module alone in this process" in report and "requests/s" in report
