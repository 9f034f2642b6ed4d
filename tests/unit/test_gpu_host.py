"""What the GPU host needs and cannot be checked there before a run: the carry's selection and size check, the
runtime switches the host needs (a server tree without pytriton, the stub's library path, a commit without git),
NVML's memory on a host that lists no process of ours, and the GPU specs on the engine (placement, the first call's
time against the device's limits, what it measures, every family, step and goal exercised by the CPU rehearsal).
`make gpu-dry-run` runs the rest on this CPU."""

import os
import re
import zipfile

import pytest

from deploy.gpu_host import carry, stub_imports
from kit.control.configs import REPO_ROOT
from kit.server.runtime import DIST_ENV, STUB_LIBRARY_ENV, ServerError, ServerOptions, server_command, server_env, triton_dist
from perf.engine import gpu
from perf.engine.budget import POINT_OVERHEAD_S, REPORT_S, SETUP_S, STOP_S, call_s, part_s
from perf.engine.spec import load_spec
from perf.engine.sweep import COMMIT_ENV, source_commit
from perf.engine.targets import merged, variant_profile
from perf.workloads.pixels import RESNET
from perf.workloads.radar import RADAR

RUN_SH = REPO_ROOT / "deploy" / "gpu_host" / "run.sh"

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


# --- runtime switches -----------------------------------------------------------------------------------------


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


def test_only_the_servers_processes_get_the_stubs_library_path(monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/host/lib")
    monkeypatch.delenv(STUB_LIBRARY_ENV, raising=False)
    assert server_env()["LD_LIBRARY_PATH"] == "/host/lib"
    monkeypatch.setenv(STUB_LIBRARY_ENV, "/opt/python/lib")
    assert server_env()["LD_LIBRARY_PATH"] == "/opt/python/lib:/host/lib"
    assert os.environ["LD_LIBRARY_PATH"] == "/host/lib"


def test_the_gpu_hosts_copy_names_the_commit_the_carry_recorded_even_beside_a_stale_git(tmp_path, monkeypatch):
    monkeypatch.delenv(COMMIT_ENV, raising=False)
    assert source_commit(tmp_path) == "unknown"
    own = source_commit()
    assert own != "unknown"  # this checkout has git
    monkeypatch.setenv(COMMIT_ENV, "abc1234")
    assert source_commit(tmp_path) == "abc1234"
    # The host's copy came with an earlier copy's .git once, and the runs named that copy's commit.
    assert source_commit() == "abc1234"


def fake_site_package(root, name, code):
    package = root / "site-packages" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(code)
    return str(package / "__init__.py")


def test_the_stubs_hide_the_host_package_whose_own_code_raised(tmp_path):
    scipy = fake_site_package(tmp_path, "scipy", "")
    transformers = str(tmp_path / "site-packages" / "transformers" / "utils.py")
    stubs = tmp_path / "stub-wheels"
    # innermost exception first: importlib's own frames carry no package, the next exception's do
    chain = [["<frozen importlib._bootstrap>"], [transformers, scipy, "<frozen importlib._bootstrap>"]]
    assert stub_imports.culprit(chain, stubs) == "scipy"
    assert stub_imports.culprit([[transformers]], stubs) is None  # the kit needs transformers: nothing to hide
    assert stub_imports.culprit([[str(stubs / "numpy" / "__init__.py")]], stubs) is None
    assert stub_imports.package_of(str(tmp_path / "site-packages" / "six.py")) == "six"
    assert stub_imports.package_of("/usr/lib/python3.12/importlib/__init__.py") is None


def test_stub_imports_hides_a_package_that_fails_under_the_stubs_numpy_and_what_imports_it(tmp_path, monkeypatch):
    """As on the GPU host: SciPy fails under the stubs' numpy 1.x, scikit-learn imports SciPy, and a needed package
    imports scikit-learn only where importlib finds it (as transformers does). Both are hidden, one probe at a time,
    and then the imports succeed."""
    fake_site_package(tmp_path, "scipy", "raise AttributeError(\"module 'numpy' has no attribute 'long'\")\n")
    fake_site_package(tmp_path, "sklearn", "import scipy\n")
    optional = "import importlib.util\nif importlib.util.find_spec('sklearn'):\n    import sklearn\n"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site-packages"))
    assert stub_imports.hidden_packages(tmp_path / "stub-wheels", imports=optional) == ["scipy", "sklearn"]


def test_the_baselines_refuse_an_unknown_runner(tmp_path, monkeypatch):
    from perf.baselines.radar_model import logits_from_env

    monkeypatch.setenv("RADAR_RUNNER", "tensorrt")
    with pytest.raises(ValueError, match="tensorrt"):
        logits_from_env(tmp_path)


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
    monkeypatch.setattr(gpu.pynvml, "nvmlDeviceGetComputeRunningProcesses", lambda handle: listed)
    assert gpu.process_memory_mib(object(), {7, 8}) == expected


# --- the GPU specs on the engine ------------------------------------------------------------------------------


def part(name: str, spec: str = "gpu") -> dict:
    return load_spec(spec)["suite"][name]


def test_the_gpu_run_serves_the_pytorch_runner_in_fp16_on_the_gpu_and_the_rehearsal_on_the_cpu_in_fp32():
    for spec, name, workload in (("gpu", "radar", RADAR), ("gpu-resnet", "resnet", RESNET)):
        on_gpu = workload.for_spec(part(name, spec))
        runner = next(m for m, s in variant_profile(on_gpu, {})["roles"].items() if s.get("runner") == "torch")
        gpu_settings = variant_profile(on_gpu, {})["roles"][runner]
        assert (gpu_settings["device"], gpu_settings["dtype"], gpu_settings["gpus"]) == ("cuda", "fp16", [0])
        assert on_gpu.deployment.on_gpu
        rehearsal = workload.for_spec({**part(name, spec), "placement": {"device": "cpu", "dtype": "fp32"}})
        cpu_settings = variant_profile(rehearsal, {})["roles"][runner]
        assert (cpu_settings["device"], cpu_settings["dtype"]) == ("cpu", "fp32") and "gpus" not in cpu_settings
        assert not rehearsal.deployment.on_gpu


# The device tool's limits: one call runs at most 10 minutes; a session has 15 minutes of device time in all, machine
# starts included, so the first call is given about 7 and a second one what is left.
CALL_LIMIT_S, FIRST_CALL_S, SECOND_CALL_S = 600, 420, 300
# After the sweep's deadline: the reports copied and the results packed.
PACKING_S = 20


def test_the_first_call_fits_seven_minutes_set_up_included_and_its_deadline_the_call_limit():
    deadline_s = int(re.search(r"GPU_BUDGET_S:-(\d+)", RUN_SH.read_text()).group(1))
    first = call_s(load_spec("gpu"))
    assert first <= FIRST_CALL_S, f"{first:.0f} s at the estimates of perf/engine/budget.py and the spec's `budget`"
    assert first <= deadline_s, "the run's own deadline would skip steps it has time for"
    assert deadline_s + PACKING_S <= CALL_LIMIT_S, "a run cut at its deadline would still pass the call's limit"
    assert call_s(load_spec("gpu-resnet")) <= SECOND_CALL_S


def test_an_estimate_counts_the_set_up_the_starts_the_limit_the_check_and_every_window():
    spec = {
        "targets": {"kit": [{}, {}], "flask": [{}]},
        "sweep": {"input": "a", "concurrency": [64, 256]},
        "extra": {"b": {"concurrency": [64]}},
        "window": {"warmup_s": 10, "duration_s": 15},
        "rounds": 2,
        "limit": {},
        "accuracy": {},
        "budget": {"start_s": 40, "limit_s": 30, "accuracy_s": 12},
    }
    windows = 2 * 3 * 3 * (25 + POINT_OVERHEAD_S)  # rounds x settings x loads
    assert part_s(spec) == 40 + 12 + 2 * 30 + windows + STOP_S + REPORT_S
    assert call_s({"suite": {"a": spec, "b": spec}}) == SETUP_S + 2 * part_s(spec)


def test_the_first_call_measures_what_the_issue_asks_at_64_and_256_clients_in_long_windows():
    radar = part("radar")
    assert radar["window"]["warmup_s"] >= 10 and radar["window"]["duration_s"] >= 15
    assert radar["sweep"]["concurrency"] == [64, 256] and radar["extra"] == {}
    targets = radar["targets"]
    assert set(targets) == {"kit", "control", "batcher", "flask"}
    assert targets["kit"][0]["radar_classifier"]["profile_executions"] > 0  # the trace
    control = {"batch_ladder": [], "warm_up": False, "cuda_graphs": False, "merge": None}
    assert targets["control"][0]["radar_classifier"] == control
    assert targets["batcher"][0]["runner"] == "kit" and targets["flask"] == [{}]
    assert 64 in radar["limit"]["batch_sizes"] and radar["limit"]["ceiling"]["tflops"] == 989
    goals = radar["goals"]
    assert [(g["share"], g["clients"]) for g in goals["limit"]] == [(0.8, [64, 256]), (0.9, [64, 256])]
    versus = {g["over"]: g for g in goals["versus"]}
    assert (versus["batcher"]["factor"], versus["batcher"]["p99"], versus["flask"]["factor"]) == (1.5, "below", 20)
    assert goals["no_failures"] == {"clients": [256]} and goals["accuracy"] == {"max_abs_diff": 0.01}
    assert goals["limit_over"] == {"way": "eager", "batch": 64, "factor": 1.5}


def test_the_rehearsal_runs_the_first_calls_targets_loads_limit_and_goals():
    full, quick = part("radar"), part("radar", "gpu-quick")
    for key in ("goals", "sweep", "extra", "profile", "workload", "rounds"):
        assert quick[key] == full[key], key
    traced = {"kit": [{"radar_classifier": {"profile_executions": 8}}]}  # its short windows run few executions
    assert quick["targets"] == merged(full["targets"], traced)
    assert quick["limit"]["batch_sizes"] == full["limit"]["batch_sizes"]
    assert list(load_spec("gpu-quick")["suite"]) == list(load_spec("gpu")["suite"])
