"""The GPU measurement's pure parts (perf/gpu): the time budget, the issue's verdicts, the carry's selection and
size check, the reduced build source, and the runtime switches the host needs. What needs a GPU is run by
perf/gpu/run.sh on the host; `make gpu-dry-run` runs the same code on CPU."""

import json
import os
import zipfile

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import SOURCE, RepositoryError, load_source_config, parameters
from kit.control.gpu_embedded_profile import apply_gpu_embedded_profile
from kit.control.runtime import DIST_ENV, STUB_LIBRARY_ENV, ServerError, ServerOptions, server_command, server_env, triton_dist
from perf.engine.sweep import COMMIT_ENV, source_commit
from perf.gpu import carry, nvml
from perf.gpu.__main__ import exit_status
from perf.gpu.plan import (
    DEFAULT_BUDGET_S,
    FULL,
    HOST_SETUP_S,
    QUICK,
    REPORT_S,
    RESNET_VARIANTS,
    STOP_S,
    Budget,
    fit_units,
    phase_estimates,
)
from perf.gpu.targets import Placement, checkpoint_manifest, cpu_config, gpu_profile, resnet_variants, torch_models
from perf.gpu.verdicts import best_by_clients, instances_needed, radar_verdicts, resnet_verdicts
from perf.workloads.radar import RADAR
from perf.workloads.resnet import RESNET

# --- budget ---------------------------------------------------------------------------------------------------


def test_budget_counts_down_to_the_deadline_less_its_reserve():
    now = [100.0]
    budget = Budget(deadline=200.0, reserve_s=10.0, clock=lambda: now[0])
    assert budget.left() == 90.0 and budget.allows(90.0) and not budget.allows(91.0)
    now[0] = 195.0
    assert budget.left() == -5.0 and not budget.allows(0.0)


@pytest.mark.parametrize(
    "left, start, unit, count, fits",
    [(100, 20, 30, 5, 2), (100, 20, 30, 1, 1), (19, 20, 30, 3, 0), (50, 20, 30, 3, 1), (100, 20, 0, 3, 3), (10, 20, 0, 3, 0)],
)
def test_fit_units_counts_the_servers_that_fit_after_one_shared_start(left, start, unit, count, fits):
    assert fit_units(left, start, unit, count) == fits


def test_the_full_plan_fits_the_budget_that_run_sh_leaves_it_with_the_shutdown_reserved():
    assert sum(phase_estimates(FULL).values()) <= DEFAULT_BUDGET_S - HOST_SETUP_S - Budget(0.0).reserve_s
    assert Budget(0.0).reserve_s >= REPORT_S + STOP_S


def test_the_dry_run_exercises_every_phase_and_every_verdict():
    assert len(QUICK.radar_instances) >= 2 and len(QUICK.batcher) >= 2
    assert {64, 256} <= set(QUICK.clients) and max(QUICK.resnet_clients) >= 32
    assert QUICK.clients == FULL.clients


# --- verdicts -------------------------------------------------------------------------------------------------


def row(clients, chunks=0.0, p99=100.0, error=None, setting="s", instances=8, images=0.0):
    return {
        "concurrency": clients,
        "chunks_per_s": chunks,
        "images_per_s": images,
        "p99_ms": p99,
        "error": error,
        "setting": setting,
        "radar_instances": instances,
    }


def by_target(verdicts):
    return {v.target: v for v in verdicts}


def test_best_by_clients_prefers_points_without_failures():
    rows = [row(64, 900, error="3 requests failed"), row(64, 500), row(64, 600), row(256, 100, error="x")]
    best = best_by_clients(rows, "chunks_per_s")
    assert best[64]["chunks_per_s"] == 600 and best[256]["error"] == "x"


def test_radar_verdicts_judge_each_target_from_the_best_layouts():
    kit = [row(64, 850, p99=90), row(64, 700, instances=16), row(256, 900, p99=300), row(256, 880, instances=16)]
    flask = [row(64, 200), row(256, 400)]
    batcher = [row(64, 700, p99=95), row(256, 700, p99=250)]
    v = by_target(radar_verdicts(kit, flask, batcher, limit=1000.0))
    assert v["kit >= 0.8 x the offline limit at 64 clients"].met
    assert v["kit >= 3 x Flask per request at 64 clients"].met
    assert not v["kit >= 3 x Flask per request at 256 clients"].met  # 2.25 x
    assert v["kit >= 1.2 x the asyncio batcher at 64 clients, p99 below its"].met
    assert not v["kit >= 1.2 x the asyncio batcher at 256 clients, p99 below its"].met  # p99 300 > 250
    assert v["zero failed requests at 256 clients (every kit layout)"].met


def test_radar_verdicts_say_what_was_not_measured_and_count_every_failed_layout():
    kit = [row(256, 900), row(256, 10, error="2 requests failed", setting="entry=32")]
    v = by_target(radar_verdicts(kit, [], [], limit=None))
    assert not v["kit >= 0.8 x the offline limit at 64 clients"].met
    assert "not measured" in v["kit >= 3 x Flask per request at 64 clients"].detail
    failures = v["zero failed requests at 256 clients (every kit layout)"]
    assert not failures.met and "entry=32" in failures.detail


def test_resnet_verdicts_want_1_5x_from_32_clients_and_never_slower_within_noise():
    rows = [
        row(1, images=100, setting="none"),
        row(1, images=96, setting="cost"),  # within the 5% noise
        row(32, images=100, setting="none"),
        row(32, images=160, setting="cost"),
        row(70, images=100, setting="none"),
        row(70, images=140, setting="cost"),
    ]
    v = by_target(resnet_verdicts(rows))
    assert v["cost rule >= 1.5 x no batching at 32 clients"].met
    assert not v["cost rule >= 1.5 x no batching at 70 clients"].met
    never = next(x for x in v.values() if x.target.startswith("cost rule never slower"))
    assert never.met
    rows[1] = row(1, images=90, setting="cost")
    never = next(x for x in resnet_verdicts(rows) if x.target.startswith("cost rule never slower"))
    assert not never.met


def test_a_point_that_completed_nothing_is_not_judged_a_win():
    rows = [row(32, images=0.0, setting="none"), row(32, images=15.0, setting="cost")]
    verdict = resnet_verdicts(rows)[0]
    assert not verdict.met and "no request" in verdict.detail


def test_resnet_verdicts_without_both_variants_are_not_met():
    assert not any(v.met for v in resnet_verdicts([row(32, images=100, setting="none")]))


def test_instances_needed_is_where_more_instances_stop_raising_throughput():
    kit = [row(64, 500, instances=8), row(64, 980, instances=16), row(64, 1000, instances=32), row(256, 1, instances=8)]
    needed = instances_needed(kit, 64)
    assert needed["instances"] == 16 and needed["saturated"]
    kit[2] = row(64, 1500, instances=32)
    needed = instances_needed(kit, 64)
    assert needed["instances"] == 32 and not needed["saturated"]
    assert instances_needed(kit, 16) is None


# --- carry ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "member, kept",
    [
        ("pytriton/tritonserver/bin/tritonserver", True),
        ("pytriton/tritonserver/backends/python/libtriton_python.so", True),
        ("pytriton/tritonserver/caches/local/libtritoncache_local.so", True),
        ("pytriton/tritonserver/python_backend_stubs/3.12/triton_python_backend_stub", True),
        ("pytriton/tritonserver/python_backend_stubs/3.11/triton_python_backend_stub", False),
        ("pytriton/tritonserver/python_backend_stubs/3.12/", False),
        ("nvidia_pytriton.libs/libcudart-09529672.so.12.6.77", True),
        ("nvidia_pytriton.libs/libpython3-419a3a08.13.so.1.0", False),
        ("pytriton/client/client.py", False),
        ("nvidia_pytriton-0.7.0.dist-info/METADATA", False),
    ],
)
def test_the_server_repack_keeps_the_server_its_libraries_and_one_stub(member, kept):
    assert carry.keeps(member, "3.12") is kept


def test_a_bundled_libpython_stays_for_its_own_python():
    assert carry.keeps("nvidia_pytriton.libs/libpython3-419a3a08.13.so.1.0", "3.13")


def test_repack_refuses_a_python_without_a_stub(tmp_path):
    wheel = tmp_path / "server.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pytriton/tritonserver/bin/tritonserver", b"elf")
        z.writestr("pytriton/tritonserver/python_backend_stubs/3.12/triton_python_backend_stub", b"elf")
    with pytest.raises(carry.CarryError, match="3.99"):
        carry.repack_server(wheel, "3.99", tmp_path / "out.tar.xz")
    assert carry.repack_server(wheel, "3.12", tmp_path / "out.tar.xz") == 6


def test_carried_pins_are_the_serve_locks_and_a_missing_one_is_refused():
    versions = carry.lock_versions("Flask==3.1.3\npydantic_core==2.50.4  # compiled\n# comment\nnot-pinned>=1\n")
    assert versions == {"flask": "3.1.3", "pydantic-core": "2.50.4"}
    assert carry.pins(("flask", "pydantic-core"), versions) == ["flask==3.1.3", "pydantic-core==2.50.4"]
    with pytest.raises(carry.CarryError, match="uvicorn"):
        carry.pins(("uvicorn",), versions)
    lock = carry.lock_versions(carry.LOCK.read_text())
    assert carry.pins((carry.SERVER_WHEEL, *carry.CARRIED, *carry.STUB_CARRIED), lock)
    assert lock["numpy"].startswith("1."), "the stubs' numpy must stay 1.x (the 2.51 stub reads numpy 2 arrays wrongly)"


def test_the_manifest_counts_the_carry_with_the_tree_against_the_limit(tmp_path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a.whl").write_bytes(b"x" * 300)
    (tmp_path / "server.tar.xz").write_bytes(b"x" * 600)
    (tmp_path / "MANIFEST.json").write_text("{}")
    summary = carry.manifest(tmp_path, tree=100, limit=1000)
    assert summary["files"] == {"server.tar.xz": 600, "wheels/a.whl": 300}
    assert summary["total_bytes"] == 1000
    carry.check_size(summary)
    with pytest.raises(carry.CarryError, match="exceeds"):
        carry.check_size(carry.manifest(tmp_path, tree=101, limit=1000))


# --- the reduced build source and the dry run's placement ------------------------------------------------------


def test_torch_runner_models_take_their_checkpoint_instead_of_the_onnx_file():
    manifest = json.loads((SOURCE / "artifacts.json").read_text())
    reduced = checkpoint_manifest(manifest, ["radar_classifier", "resnet50_backbone"])
    assert reduced["models"]["radar_classifier"] == {"files": ["radar/checkpoint"]}
    assert reduced["models"]["resnet50_backbone"] == {"files": ["resnet50/checkpoint"]}
    assert reduced["models"]["radar"] == manifest["models"]["radar"]
    with pytest.raises(RepositoryError, match="checkpoint"):
        checkpoint_manifest(manifest, ["ocr_det"])


def test_the_gpu_profile_of_a_workload_keeps_the_committed_settings_under_overrides():
    gpu = gpu_profile(RADAR, {"radar": {"instances": 32}}, Placement.for_device("cuda"))["models"]
    assert gpu["radar"]["instances"] == 32 and gpu["radar_classifier"]["dtype"] == "fp16"
    assert set(gpu) == set(RADAR.models) and torch_models({"models": gpu}) == ["radar_classifier"]
    cpu = gpu_profile(RESNET, {}, Placement.for_device("cpu"))["models"]
    assert cpu["resnet50_backbone"]["dtype"] == "fp32"


def test_the_dry_run_moves_only_gpu_runner_models_to_the_cpu_in_fp32():
    settings = gpu_profile(RESNET, {}, Placement.for_device("cpu"))["models"]
    config = apply_gpu_embedded_profile(load_source_config("resnet50_backbone"), settings["resnet50_backbone"])
    assert cpu_config(config)
    assert parameters(config)["device"] == "cpu" and parameters(config)["dtype"] == "fp32"
    assert [(g.kind, list(g.gpus)) for g in config.instance_group] == [(mc.ModelInstanceGroup.KIND_CPU, [])]
    entry = apply_gpu_embedded_profile(load_source_config("resnet50"), settings["resnet50"])
    assert not cpu_config(entry)


def test_every_resnet_variant_of_the_spec_is_measured():
    labels = [RESNET.label(gpu_profile(RESNET, s, Placement.for_device("cuda"))["models"]) for s in resnet_variants()]
    assert labels == list(RESNET_VARIANTS)


# --- runtime switches and the baselines' runner ---------------------------------------------------------------


def test_kit_triton_dist_names_a_server_tree_without_pytriton(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tritonserver").write_bytes(b"")
    monkeypatch.setenv(DIST_ENV, str(tmp_path))
    assert triton_dist() == tmp_path
    monkeypatch.setenv(DIST_ENV, str(tmp_path / "missing"))
    with pytest.raises(ServerError, match="no tritonserver binary"):
        triton_dist()


def test_gpu_metrics_stay_off_unless_asked(tmp_path):
    assert "--allow-gpu-metrics=false" in server_command(tmp_path, ServerOptions(tmp_path))
    assert "--allow-gpu-metrics=true" in server_command(tmp_path, ServerOptions(tmp_path, gpu_metrics=True))


def test_the_baselines_refuse_an_unknown_runner(tmp_path, monkeypatch):
    from perf.baselines.radar_model import logits_from_env

    monkeypatch.setenv("RADAR_RUNNER", "tensorrt")
    with pytest.raises(ValueError, match="tensorrt"):
        logits_from_env(tmp_path)


def test_only_the_servers_processes_get_the_stubs_library_path(monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/host/lib")
    monkeypatch.delenv(STUB_LIBRARY_ENV, raising=False)
    assert server_env()["LD_LIBRARY_PATH"] == "/host/lib"
    monkeypatch.setenv(STUB_LIBRARY_ENV, "/opt/python/lib")
    assert server_env()["LD_LIBRARY_PATH"] == "/opt/python/lib:/host/lib"
    assert os.environ["LD_LIBRARY_PATH"] == "/host/lib"


# --- what a run reports: its commit, its exit status, the GPU memory it saw --------------------------------------


def test_a_tree_without_git_names_the_commit_the_carry_recorded(tmp_path, monkeypatch):
    monkeypatch.delenv(COMMIT_ENV, raising=False)
    assert source_commit(tmp_path) == "unknown"
    monkeypatch.setenv(COMMIT_ENV, "abc1234+changes")
    assert source_commit(tmp_path) == "abc1234+changes"
    assert source_commit() not in ("unknown", "abc1234+changes")  # this checkout has git


def test_the_run_fails_when_a_phase_failed_or_was_skipped():
    clean = {"errors": [], "skipped": []}
    assert exit_status(clean) == 0
    assert exit_status({**clean, "skipped": [{"what": "resnet", "why": "3 s left"}]}) == 1
    assert exit_status({**clean, "errors": [{"what": "prepare", "error": "ModuleNotFoundError('onnxscript')"}]}) == 1


class FakeProcess:
    def __init__(self, pid, used):
        self.pid, self.usedGpuMemory = pid, used


@pytest.mark.parametrize(
    "listed, expected",
    [
        ([FakeProcess(7, 2 * 2**20), FakeProcess(8, 2**20), FakeProcess(99, 2**30)], 3.0),
        ([], None),  # a VM or container: the driver lists other process ids, or none
        ([FakeProcess(99, 2**30)], None),
        ([FakeProcess(7, None)], None),
    ],
)
def test_gpu_memory_of_the_target_falls_back_to_the_device_where_nvml_lists_none_of_it(monkeypatch, listed, expected):
    monkeypatch.setattr(nvml.pynvml, "nvmlDeviceGetComputeRunningProcesses", lambda handle: listed)
    assert nvml.process_memory_mib(object(), {7, 8}) == expected
