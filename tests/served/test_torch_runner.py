"""The PyTorch runner served, on the CPU: the gpu-embedded profile's `radar_classifier` (ladder, warm-up, a merge priced
by its own warm-up) with `device: cpu`, as the GPU run rehearses it. After the warm-up, which runs before the model is
ready, a sweep of mixed texts from concurrent clients meets no shape that was not warmed; every run's rows padded up
to the ladder answer as the unpadded model does; the runner's stage timings, shapes and warm-up reach Triton's metrics
port.

The stubs need PyTorch, which the serving venv does not hold: they run a python3 that sees the serving venv's packages
first (its numpy 1.26, which the 2.51 stub needs) and the export venv's after them (torch, transformers), as the GPU
host's run overlays them (deploy/gpu_host/run.sh)."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from clients.radar import RadarClient
from kit.control.configs import REPO_ROOT, parameters
from kit.control.repository import build
from kit.server.runtime import ServerOptions, TritonServer
from samples.texts import sample_texts
from tests.profiles import profile_data, variant
from tests.radar_reference import direct_scorer
from tests.served.reliability import RADAR_MODELS

LADDER = [1, 2, 4, 8]
CLASSIFIER = {
    "runner": "torch",
    "device": "cpu",
    "dtype": "fp32",
    "instances": 1,
    "ragged_batch": True,
    "queue_policy": False,
    "max_batch_size": 8,
    "preferred_batch_size": [4, 8],
    "max_queue_delay_microseconds": 2000,
    "merge": "measured",
}
EXPORT_VENV = REPO_ROOT / ".venv" / "export"


def stub_python(folder: Path) -> Path:
    """A virtualenv whose python3 sees this venv's packages, then the export venv's; its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = subprocess.run(
        [str(folder / "bin" / "python3"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    layers = [sysconfig.get_paths()["purelib"], str(EXPORT_VENV / "lib" / version / "site-packages")]
    Path(site, "_kit_layers.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in layers))
    return folder / "bin"


@pytest.fixture(scope="module")
def served(tmp_path_factory, radar_artifacts):
    if not (EXPORT_VENV / "bin" / "python").exists():
        pytest.fail("the export venv is missing: make test installs it before the served tests")
    work = tmp_path_factory.mktemp("torch-runner")
    profile = profile_data("gpu-embedded")
    profile["roles"]["text-graph"] = CLASSIFIER
    profile["models"].pop("radar_classifier")
    path = variant(work, profile, "gpu-embedded")
    models = build(path, work / "repository", radar_artifacts.parent, specs={}, models=RADAR_MODELS)
    configs = {name: model.written() for name, model in models.items()}
    bin_dir = stub_python(work / "stub-python")
    # The stub embeds a libpython of its own minor version: this Python's own, so that its compiled modules (ssl,
    # which transformers' hub client imports) match it, as run.sh hands the stubs the host's.
    environment = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LD_LIBRARY_PATH": sysconfig.get_config_var("LIBDIR")}
    options = ServerOptions.on_free_ports(work / "repository", environment=environment)
    with TritonServer(options, log_path=work / "server.log") as server:
        yield server, configs, work / "server.log"


def metric_samples(url: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of one metric on Triton's metrics port, each with its labels."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    samples = []
    for match in re.finditer(rf"^{name}\{{([^}}]*)\}} (\S+)$", text, re.MULTILINE):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        samples.append((labels, float(match.group(2))))
    return samples


def test_the_runner_warms_every_ladder_size_by_every_bucket_before_it_is_ready(served):
    server, configs, log = served
    buckets = parameters(configs["radar"])["buckets"].split(",")
    runner = parameters(configs["radar_classifier"])
    assert runner["warm_lengths"] == ",".join(buckets) and runner["batch_ladder"] == ",".join(map(str, LADDER))
    warm = {labels["what"]: value for labels, value in metric_samples(server.options.metrics_url, "kit_runner_warmup")}
    assert warm["shapes"] == len(LADDER) * len(buckets) and warm["graphs"] == 0 and warm["seconds"] > 0
    assert re.search(rf"warmed {len(LADDER) * len(buckets)} shapes in [0-9.]+ s", log.read_text())


def test_mixed_texts_meet_no_unwarmed_shape_and_padded_runs_answer_as_the_model_alone(served, radar_artifacts):
    server, _, _ = served
    texts = sample_texts(48, 20, 900, seed=11)
    client = RadarClient(server.options.grpc_url, "grpc")
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(client.classify, texts))
    reference = direct_scorer(radar_artifacts)
    for text, result in zip(texts, results):
        expected = [reference(text[start:end]) for start, end in result.chunk_spans]
        np.testing.assert_allclose(result.chunk_scores, expected, atol=reference.atol)

    url = server.options.metrics_url
    runs = metric_samples(url, "kit_runner_runs_total")
    assert sum(value for _, value in runs) > 0
    assert [labels for labels, value in runs if labels["warmed"] != "true" and value] == []
    assert {int(labels["shape"].split("x")[0]) for labels, _ in runs} <= set(LADDER)
    rows = {labels["rows"]: value for labels, value in metric_samples(url, "kit_runner_rows_total")}
    chunks = sum(len(result.chunk_spans) for result in results)
    assert rows["asked"] == chunks
    forward = [value for labels, value in metric_samples(url, "kit_runner_stage_seconds_count") if labels["stage"] == "forward"]
    assert forward == [sum(value for _, value in runs)]
