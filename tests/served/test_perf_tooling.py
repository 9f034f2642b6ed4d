"""The perf kit's tooling on tiny sweeps (RADAR, and OCR): it starts its servers, runs perf_analyzer
against Triton and a baseline, parses what perf_analyzer measured and writes the report. Not a speed test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perf import perf_analyzer
from perf.inputs import radar_inputs
from perf.report import kept_sections, write_report
from perf.sweep import main as sweep
from perf.targets import make_target
from tests.conftest import ARTIFACTS


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory, radar_artifacts):
    out = tmp_path_factory.mktemp("perf")
    assert sweep(["--spec", "tiny", "--out", str(out), "--work", str(out / "work")]) == 0
    return out, json.loads((out / "results.json").read_text())


# Two images (a page and a screenshot), one small kit layout and one uvicorn worker, 4 requests a
# point: the OCR code paths end to end in well under a minute.
OCR_TINY = {
    "description": "Checks the OCR tooling, not the speed.",
    "workload": "ocr",
    "model": "artifacts/ocr",
    "inputs": [{"name": "mixed", "count": 2, "seed": 900}],
    "requests": {"per_client": 2, "min": 4, "max": 4},
    "probe": {"input": "mixed", "concurrency": 2, "requests": 4, "warmup": 2},
    "sweep": {"input": "mixed", "concurrency": [2]},
    "extra": {},
    "limit": {"input": "mixed", "images": 2, "warmup": 1},
    "targets": {"kit": [{"ocr": {"instances": 1}, "ocr_det": {"instances": 1}, "ocr_rec": {"instances": 1}}], "uvicorn": [{"workers": 1}]},
}


@pytest.fixture(scope="module")
def ocr_sweep(tmp_path_factory):
    if not (ARTIFACTS / "ocr" / "rec" / "model.onnx").is_file():
        pytest.fail(f"{ARTIFACTS / 'ocr'} has no exported models: run `make export` (make test does it)")
    out = tmp_path_factory.mktemp("perf-ocr")
    spec = out / "ocr-tiny.json"
    spec.write_text(json.dumps(OCR_TINY))
    assert sweep(["--spec", str(spec), "--out", str(out), "--work", str(out / "work")]) == 0
    return out, json.loads((out / "results.json").read_text())


def test_sweep_measures_the_kit_and_a_baseline_with_perf_analyzer(tiny_sweep):
    _, results = tiny_sweep
    rows = results["probes"] + results["sweeps"]
    assert {r["family"] for r in rows} == {"kit", "flask"}
    for row in rows:
        assert row["error"] is None
        assert row["throughput"] > 0 and row["chunks_per_s"] > row["throughput"]
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert row["client_cpu_s"] > 0 and row["server_cpu_s"] > 0 and row["peak_rss_mb"] > 0


def test_kit_runs_carry_tritons_time_split(tiny_sweep):
    _, results = tiny_sweep
    kit = next(r for r in results["sweeps"] if r["family"] == "kit")
    assert kit["triton"]["radar"]["requests"] >= kit["requests"]
    assert kit["triton"]["radar_classifier"]["inferences"] >= kit["requests"]  # at least one chunk per text


def test_limit_compares_one_session_with_parallel_sessions(tiny_sweep):
    _, results = tiny_sweep
    layouts = {r["layout"].split(" x ")[0] for r in results["limit"]["layouts"]}
    assert layouts >= {"1 session"}
    assert results["limit"]["best"]["chunks_per_s"] > 0


def test_report_has_tables_and_plots(tiny_sweep):
    out, _ = tiny_sweep
    report = (out / "REPORT.md").read_text()
    for heading in ("## RADAR: results at each family's best setting", "## RADAR: the limit", "## RADAR: memory"):
        assert heading in report
    for png in ("radar_throughput_vs_p99.png", "radar_settings.png", "radar_memory.png"):
        assert (out / png).stat().st_size > 1000


def test_report_keeps_other_owners_sections(tiny_sweep, tmp_path):
    out, results = tiny_sweep
    path = tmp_path / "RESULTS.md"
    path.write_text("# Performance results\n\n## RADAR: old\n\nold numbers\n\n## ResNet50\n\npadding table\n")
    write_report(results, out, path)
    text = path.read_text()
    assert "old numbers" not in text and "## ResNet50\n\npadding table" in text
    assert kept_sections(text).startswith("## ResNet50")


def test_a_failed_request_is_reported_as_an_error(tmp_path, radar_artifacts):
    inputs = radar_inputs(tmp_path, "blank", 2, 100, 120, seed=1)
    inputs.http.write_text(json.dumps({"data": [{"payload": [{"text": "   "}]}]}))
    target = make_target("flask", {}, ARTIFACTS / "radar", tmp_path)
    target.start()
    try:
        m = perf_analyzer.run(target.load_args(inputs), perf_analyzer.Load(4, concurrency=1), tmp_path, "blank")
    finally:
        target.stop()
    assert m.error and "400" in m.error


def test_parse_csv_reads_perf_analyzers_report(tmp_path):
    path = tmp_path / "pa.csv"
    path.write_text("Concurrency,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency,Avg latency\n"
                    "8,19.9975,25574,0,43878,44238,44820,1011485,61067\n")
    parsed = perf_analyzer.parse_csv(path)
    assert parsed["throughput"] == pytest.approx(19.9975)
    assert parsed["p99_ms"] == pytest.approx(1011.485) and parsed["avg_ms"] == pytest.approx(61.067)


def test_ocr_sweep_measures_the_kit_and_uvicorn_in_images(ocr_sweep):
    _, results = ocr_sweep
    assert results["workload"] == "ocr"
    rows = results["probes"] + results["sweeps"]
    assert {r["family"] for r in rows} == {"kit", "uvicorn"}
    for row in rows:
        assert row["error"] is None
        assert row["throughput"] > 0 and row["images_per_s"] == row["throughput"]
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert row["client_cpu_s"] > 0 and row["server_cpu_s"] > 0 and row["peak_rss_mb"] > 0
    kit = next(r for r in results["sweeps"] if r["family"] == "kit")
    assert set(kit["triton"]) == {"ocr", "ocr_det", "ocr_cls", "ocr_rec"}  # only the OCR models were loaded
    assert kit["triton"]["ocr"]["requests"] >= kit["requests"] and kit["triton"]["ocr_det"]["requests"] >= kit["requests"]
    assert kit["setting"].startswith("det 1x1 rec 1x1")


def test_ocr_limit_compares_one_process_with_one_process_per_core(ocr_sweep):
    _, results = ocr_sweep
    layouts = [r["layout"] for r in results["limit"]["layouts"]]
    assert layouts[0].startswith("1 process x") and (len(layouts) == 1 or "processes x 1 thread" in layouts[1])
    assert results["limit"]["images"] == 2 and results["limit"]["best"]["images_per_s"] > 0


def test_ocr_report_has_its_sections_and_plots(ocr_sweep):
    out, _ = ocr_sweep
    report = (out / "REPORT.md").read_text()
    for heading in ("## OCR: results at each family's best setting", "## OCR: targets", "## OCR: the limit",
                    "## OCR: where the kit's time goes", "## OCR: memory"):
        assert heading in report
    assert "## RADAR" not in report and "kit vs FastAPI + uvicorn (workers=1) at 2 clients" in report
    for png in ("ocr_throughput_vs_p99.png", "ocr_settings.png", "ocr_memory.png"):
        assert (out / png).stat().st_size > 1000


def test_each_workload_rewrites_only_its_own_sections(tiny_sweep, ocr_sweep, tmp_path):
    (radar_out, radar), (ocr_out, ocr) = tiny_sweep, ocr_sweep
    path = tmp_path / "RESULTS.md"
    path.write_text("# Performance results\n\n## OCR: old\n\nold images\n\n## RADAR: old\n\nold texts\n\n## ResNet50\n\npadding table\n")
    write_report(radar, radar_out, path)
    text = path.read_text()
    assert "old texts" not in text and "## OCR: old\n\nold images" in text and "## ResNet50\n\npadding table" in text
    write_report(ocr, ocr_out, path)
    text = path.read_text()
    assert "old images" not in text and "## OCR: results at each family's best setting" in text
    radar_part = text[text.index("## RADAR: how"):text.index("## OCR: how")]
    write_report(ocr, ocr_out, path)  # again: RADAR's sections stay byte for byte
    text = path.read_text()
    assert text[text.index("## RADAR: how"):text.index("## OCR: how")] == radar_part
    assert text.index("## RADAR: how") < text.index("## OCR: how") < text.index("## ResNet50")
    assert kept_sections(text).startswith("## ResNet50")
