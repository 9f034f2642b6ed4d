"""The precision benchmark compares equal work: within each graph of a spec's `graphs`, the kit, the
baseline and the limit run the same ONNX file, and each served figure is judged against the limit
of that same graph. Checked on the resolved configs and environments, without starting a server."""

from pathlib import Path

import pytest

from kit.control.configs import parameters
from perf.baselines.radar_model import logits_from_env
from perf.engine.report import render
from perf.engine.spec import graph_runs, load_spec
from perf.engine.targets import make_target, variant_models
from perf.engine.verdicts import judge
from perf.workloads.radar import RADAR

GRAPHS = ("model.fused.onnx", "model.int8.onnx", "model.cpu.onnx")


@pytest.fixture
def graphs_folder(radar_artifacts: Path, tmp_path) -> Path:
    """The tiny export, with every graph the precision specs name (each a link to its model.onnx)."""
    folder = tmp_path / "radar"
    folder.mkdir()
    for name in ("model.onnx", "tokenizer.json", "export.json", "token_lengths.json"):
        (folder / name).symlink_to(radar_artifacts / name)
    for name in GRAPHS:
        (folder / name).symlink_to(radar_artifacts / "model.onnx")
    return folder


@pytest.mark.parametrize("spec_name", ["precision", "precision-quick"])
def test_kit_baseline_and_limit_of_each_graph_run_that_graphs_file(spec_name, graphs_folder, tmp_path):
    spec = load_spec(spec_name)
    runs = graph_runs(spec, RADAR.graph_model)
    assert [name for name, _ in runs] == list(spec["graphs"]) == ["fp32", "fused", "int8"]
    for name, run in runs:
        graph, work = spec["graphs"][name], tmp_path / name
        kit = make_target(RADAR, "kit", run["targets"]["kit"][0], graphs_folder, work)
        served = parameters(variant_models(RADAR, kit.setting, graphs_folder, work / "kit")["radar_classifier"].written())
        baseline = make_target(RADAR, "uvicorn", run["targets"]["uvicorn"][0], graphs_folder, work)
        limit = RADAR.served(graphs_folder, work / "limit", RADAR.graph_variant(run["limit"]))[1]["onnx_model"]
        assert served["onnx_model"] == baseline.environment()["RADAR_GRAPH"] == limit == graph
        assert kit.placements["radar_texts"]["default_timeout_microseconds"] == 600_000_000  # the spec's own settings stay
        assert baseline.workers == 2


def test_baselines_load_the_graph_their_environment_names(graphs_folder, monkeypatch):
    monkeypatch.setenv("RADAR_GRAPH", "model.int8.onnx")
    assert logits_from_env(graphs_folder) is not None
    monkeypatch.setenv("RADAR_GRAPH", "model.absent.onnx")
    with pytest.raises(Exception, match="model.absent.onnx"):
        logits_from_env(graphs_folder)


def test_a_spec_with_graphs_needs_a_workload_that_serves_them():
    with pytest.raises(ValueError, match="graphs"):
        graph_runs(load_spec("precision"), "")
    assert graph_runs(load_spec("quick"), "") == [(None, load_spec("quick"))]


def row(graph: str, family: str, clients: int, chunks_per_s: float, error: str | None = None) -> dict:
    return {
        "family": family,
        "setting": "s",
        "workers": 1,
        "input": "long",
        "load": f"c={clients}",
        "concurrency": clients,
        "throughput": chunks_per_s / 2,
        "chunks_per_s": chunks_per_s,
        "p50_ms": 1000.0,
        "p99_ms": 2000.0,
        "server_cpu_s": 10.0,
        "client_cpu_s": 1.0,
        "wall_s": 10.0,
        "peak_rss_mb": 1500,
        "error": error,
        "graph": graph,
    }


def limit(rate: float) -> dict:
    best = {"layout": "1 session x 2 threads", "batch": 8, "chunks_per_s": rate, "chunks_per_cpu_s": rate / 2}
    return {"graph": "g", "chunks": 72, "bucket_count": 8, "chunks_per_text": 2.0, "layouts": [best], "best": best}


def precision_results() -> dict:
    """fp32 limit 2, fused 2.4 (1.2x), int8 3.6 (1.8x); the kit at 0.95 x its graph's limit except int8 at 64 clients."""
    rates = {"fp32": 2.0, "fused": 2.4, "int8": 3.6}
    points = [(g, c) for g in rates for c in (16, 64, 256)]
    sweeps = [row(g, "kit", c, rates[g] * (0.9 if (g, c) == ("int8", 64) else 0.95)) for g, c in points]
    sweeps += [row(g, "uvicorn", c, rates[g] * 0.8, "timed out" if (g, c) == ("fused", 256) else None) for g, c in points]
    spec = load_spec("precision")
    return {
        "spec": spec,
        "machine": {"cpu": "test", "cores": 2, "load_average_at_start": [0, 0, 0]},
        "model": spec["model"],
        "command": "python -m perf sweep --spec precision",
        "limits": {g: {**limit(r), "texts_per_s": r / 2} for g, r in rates.items()},
        "probes": [],
        "sweeps": sweeps,
    }


def test_precision_verdicts_judge_each_graph_against_its_own_limit():
    verdicts = {v.target: v.met for v in judge(RADAR, precision_results())}
    assert verdicts["fp32: 16 clients, kit >= 0.95 x limit"] and verdicts["int8: 16 clients, kit >= 0.95 x limit"]
    assert not verdicts["int8: 64 clients, kit >= 0.95 x limit"]
    assert not verdicts["fused: zero failed requests at 256 clients, FastAPI + uvicorn"]
    assert verdicts["int8: zero failed requests at 256 clients, kit (Triton)"]
    assert verdicts["fused limit >= 1.1 x the fp32 limit"] and not verdicts["int8 limit >= 2.0 x the fp32 limit"]


def test_a_run_without_fp32_judges_the_other_graphs_against_its_first_and_never_one_against_itself():
    results = precision_results()
    results["limits"].pop("fp32")
    results["sweeps"] = [r for r in results["sweeps"] if r["graph"] != "fp32"]
    targets = [v.target for v in judge(RADAR, results)]
    assert "int8 limit >= 2.0 x the fused limit" in targets
    assert not any(t.startswith("fused limit") for t in targets)


def test_a_report_over_graphs_names_each_graphs_points_and_limit(tmp_path):
    results = precision_results()
    text = render(results, RADAR, tmp_path)
    assert "**long texts, graph int8 (`model.int8.onnx`)**" in text and "## The limit of int8" in text
    assert (tmp_path / "radar_throughput_vs_p99.png").is_file()
