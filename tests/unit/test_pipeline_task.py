"""The `pipeline` task without a server: a module with a mistake in any declaration is refused by `kit add` with a
message that names the spec, the declaration and the fix, and writes no spec; a good one runs in this process as it
would served, and becomes an entry plus one batched model per network in every profile."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kit.adapters.custom_pipeline import answer_many, in_process_networks, load_definition
from kit.control.configs import REPO_ROOT, RepositoryError, parameters
from kit.control.models import main as kit_main
from kit.control.pipeline_task import ready_pipeline
from kit.control.repository import plan
from kit.control.specs import read_specs
from kit.pipelines.custom import Networks, answer
from kit.pipelines.errors import InputError
from tests import onnx_graphs

MODULES = REPO_ROOT / "tests" / "pipelines"


@pytest.fixture
def folder(tmp_path) -> Path:
    """tests/pipelines/tabular.py beside its graph, as a user keeps them."""
    shutil.copy(MODULES / "tabular.py", tmp_path)
    onnx_graphs.mlp(tmp_path / "scorer.onnx")
    return tmp_path


def add(module: Path, models: Path, *options: str) -> int:
    return kit_main(["add", module.stem, "--task", "pipeline", "--from", str(module), "--models", str(models), *options])


GOOD = (MODULES / "tabular.py").read_text()


@pytest.mark.parametrize(
    "change, words",
    [
        (
            (
                "async def run(inputs, networks):",
                "def run(inputs, networks):\n    return {}\n\n\nasync def unused(inputs, networks):",
            ),
            "run is not an async function",
        ),
        (('NETWORKS = {"scorer": "scorer.onnx"}', "NETWORKZ = {}"), "NETWORKS is missing"),
        (('NETWORKS = {"scorer": "scorer.onnx"}', 'NETWORKS = {"scorer": "scorer.pt"}'), "NETWORKS is {'scorer': 'scorer.pt'}"),
        (('NETWORKS = {"scorer": "scorer.onnx"}', 'NETWORKS = {"scorer": "other.onnx"}'), "not a file beside it"),
        (('"values": ("FP32", [8])', '"values": ("FLOAT", [8])'), "INPUTS['values'] is ('FLOAT', [8])"),
        (('"values": ("FP32", [8])', '"values": ("FP32", [0])'), "INPUTS['values'] is ('FP32', [0])"),
        (('"probs": ("FP32", [4])', '"probs": ("FP32", [5])'), "run returned 'probs' of shape (3, 4)"),
        (('"probs": probs}', '"chances": probs}'), "run returned no 'probs'"),
        (('"scale": [[1.0], [2.0], [0.5]]', '"scale": [[1.0], [0.0], [0.5]]'), "fails on its EXAMPLE: InputError: scale"),
        (('"scale": [[1.0], [2.0], [0.5]]', '"scale": [[1.0]]'), "EXAMPLE's inputs hold unequal or too few rows"),
        (("import numpy as np", "import numpy as np\nimport not_installed_here"), "importing it failed: ModuleNotFound"),
    ],
)
def test_a_mistake_in_a_pipeline_module_names_the_spec_and_the_declaration(folder, change, words, capsys):
    module = folder / "tabular.py"
    assert change[0] in GOOD
    module.write_text(GOOD.replace(*change))
    assert add(module, folder / "models") == 2
    error = capsys.readouterr().err
    assert "tabular.toml: `source`" in error and words in error, error
    assert not (folder / "models" / "tabular.toml").exists()


def test_a_pipeline_source_must_be_a_python_module(folder, capsys):
    assert kit_main(["add", "scorer", "--task", "pipeline", "--from", str(folder / "scorer.onnx"), "--models", str(folder)]) == 2
    assert "not a Python module" in capsys.readouterr().err


def test_a_module_written_for_rows_fails_its_check_when_served_unbatched(folder, capsys):
    """Unbatched, run sees one request's tensors whole: a module that reads rows fails on its EXAMPLE, and says so."""
    assert add(folder / "tabular.py", folder / "models", "--max-batch-size", "0") == 2
    error = capsys.readouterr().err
    assert "tabular.toml: `source` fails on its EXAMPLE" in error, error
    assert not (folder / "models" / "tabular.toml").exists()


@pytest.fixture
def peaks(tmp_path) -> Path:
    """tests/pipelines/peaks.py (unbatched, with SETTINGS and a file it loads) beside its graph and its weights."""
    shutil.copy(MODULES / "peaks.py", tmp_path)
    onnx_graphs.mlp(tmp_path / "scorer.onnx")
    (tmp_path / "weights.txt").write_text("\n".join(str(w) for w in np.linspace(0.5, 2.0, 8)))
    return tmp_path


def add_peaks(folder: Path, *parameters: str) -> int:
    options = [option for p in parameters for option in ("--parameter", p)]
    return add(folder / "peaks.py", folder / "models", "--max-batch-size", "0", *options)


def test_an_unbatched_pipeline_answers_each_request_whole_with_the_specs_settings(peaks, capsys):
    assert add_peaks(peaks, "threshold=2.0") == 0, capsys.readouterr().err
    spec = read_specs(peaks / "models")["peaks"]
    assert dict(spec.parameters) == {"threshold": "2.0"}
    planned = plan("cpu", specs={"peaks": spec})["peaks"]
    entry = planned.written()
    assert entry.max_batch_size == 0 and parameters(entry)["threshold"] == "2.0"
    assert int(parameters(entry)["requests_in_flight"]) > 1, "concurrent requests' network calls must meet"
    assert not entry.HasField("dynamic_batching"), "an unbatched entry has no batcher (docs/RELIABILITY.md)"
    graph = {"scorer.onnx": peaks / "scorer.onnx"}  # linked too, for a profile that runs it in the entry's process
    assert planned.files == {"pipeline.py": peaks / "peaks.py", "weights.txt": peaks / "weights.txt"} | graph
    pipeline = ready_pipeline(spec)
    networks = in_process_networks(pipeline, peaks)
    signals = [np.array([0, 3, 0, 2.5, 9], np.float32), np.array([1, 1], np.float32), np.array([5, 0, 0, 7], np.float32)]
    answers = asyncio.run(answer_many(pipeline, [{"signal": s} for s in signals], networks, rows=False))
    for signal, got in zip(signals, answers):
        want = np.flatnonzero(signal > 2.0)
        assert got["positions"].tolist() == want.tolist() and got["scores"].shape == (len(want), 4)
        alone = asyncio.run(answer(pipeline, {"signal": signal}, networks, rows=False))
        np.testing.assert_allclose(got["scores"], alone["scores"], rtol=1e-6)
    signals[1] = np.array([np.nan], np.float32)
    answers = asyncio.run(answer_many(pipeline, [{"signal": s} for s in signals], networks, rows=False))
    assert isinstance(answers[1], InputError) and "NaN" in str(answers[1])
    assert answers[2]["positions"].tolist() == [0, 3]


def test_a_file_the_module_declares_must_lie_beside_it(peaks, capsys):
    (peaks / "weights.txt").unlink()
    assert add_peaks(peaks, "threshold=2.0") == 2
    assert "`source` declares FILES 'weights.txt', which is not a file beside it" in capsys.readouterr().err


@pytest.mark.parametrize(
    "parameters, words",
    [
        ((), "`parameters` do not fit the module's SETTINGS: PeakSettings: parameter 'threshold' is missing"),
        (("threshold=2", "widow=3"), "`parameters` holds 'widow', which the module does not read; its SETTINGS take"),
        (("threshold=high",), "parameter threshold='high'"),
    ],
)
def test_a_pipeline_setting_that_does_not_fit_its_module_names_the_key(peaks, parameters, words, capsys):
    assert add_peaks(peaks, *parameters) == 2
    error = capsys.readouterr().err
    assert "peaks.toml:" in error and words in error, error
    assert not (peaks / "models" / "peaks.toml").exists()


def test_a_pipeline_runs_in_process_as_its_arithmetic_says(folder):
    pipeline = load_definition(folder / "tabular.py")
    values = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    scale = np.array([[1.0], [2.0], [4.0]], np.float32)
    got = asyncio.run(answer(pipeline, {"values": values, "scale": scale}, in_process_networks(pipeline, folder)))
    alone = asyncio.run(
        answer(pipeline, {"values": values / scale, "scale": np.ones_like(scale)}, in_process_networks(pipeline, folder))
    )
    np.testing.assert_allclose(got["probs"], alone["probs"], rtol=1e-6)
    assert got["label"].shape == (3, 1) and got["top"][:, 0].tolist() == got["probs"].max(axis=1).tolist()


def test_a_network_call_of_more_rows_than_it_takes_goes_in_parts():
    calls = []

    async def call(name, inputs):
        calls.append(len(inputs["x"]))
        return {"y": inputs["x"] * 2}

    networks = Networks({"double": "double.onnx"}, call, max_rows=2)
    out = asyncio.run(networks.double({"x": np.arange(5)}))
    assert calls == [2, 2, 1] and out["y"].tolist() == [0, 2, 4, 6, 8]
    assert not hasattr(networks, "triple")
    with pytest.raises(KeyError, match="no network 'triple': the pipeline declares double"):
        networks["triple"]


@pytest.mark.parametrize("profile, backend", [("cpu", "python"), ("gpu", "onnxruntime"), ("gpu-embedded", "python")])
def test_a_pipeline_spec_becomes_an_entry_and_a_batched_model_per_network_in_every_profile(folder, profile, backend):
    assert add(folder / "tabular.py", folder / "models", "--max-batch-size", "8") == 0
    configs = {name: model.written() for name, model in plan(profile, specs=read_specs(folder / "models")).items()}
    entry, network = configs["tabular"], configs["tabular_scorer"]
    assert entry.backend == "python" and entry.max_batch_size == 8
    assert all(group.kind == group.KIND_CPU for group in entry.instance_group)
    assert [t.name for t in entry.input] == ["values", "scale"] and [t.name for t in entry.output] == ["label", "top", "probs"]
    assert parameters(entry)["door_route"] == "/v1/tabular" and "door_route" not in parameters(network)
    assert network.backend == backend and network.max_batch_size == 8
    for config in (entry, network):
        policy = config.dynamic_batching.default_queue_policy
        assert 0 < policy.max_queue_size <= 4096 and policy.timeout_action == policy.REJECT


def test_a_batch_of_requests_runs_as_one_and_a_bad_request_fails_alone(folder):
    """The entry's way (kit.adapters.custom_pipeline.answer_many): the requests of one shape share one run and one
    network call; a request the module refuses fails alone and the others keep their own answers."""
    pipeline = load_definition(folder / "tabular.py")
    graphs = in_process_networks(pipeline, folder)
    calls = []

    async def counted(name, inputs):
        calls.append(len(inputs["features"]))
        return await graphs[name](inputs)

    networks = Networks(pipeline.networks, counted)
    rng = np.random.default_rng(1)
    requests = [
        {"values": rng.standard_normal((n, 8)).astype(np.float32), "scale": np.ones((n, 1), np.float32)} for n in (1, 3, 2)
    ]
    alone = [asyncio.run(answer(pipeline, r, in_process_networks(pipeline, folder))) for r in requests]
    results = asyncio.run(answer_many(pipeline, requests, networks))
    assert calls == [6], "one network call for the three requests' six rows"
    for got, want in zip(results, alone):
        np.testing.assert_allclose(got["probs"], want["probs"], rtol=1e-6)
        assert got["label"].tolist() == want["label"].tolist()
    requests[1]["scale"][1] = 0.0
    calls.clear()
    results = asyncio.run(answer_many(pipeline, requests, networks))
    assert isinstance(results[1], InputError) and "scale must be positive" in str(results[1])
    for index in (0, 2):
        np.testing.assert_allclose(results[index]["probs"], alone[index]["probs"], rtol=1e-6)


@pytest.fixture
def sharing(folder) -> Path:
    """Beside `tabular` (its own scorer network), `scorer`, an onnx spec of the same graph, and two more copies of
    the module, `ledger` and `audit`, each added with its scorer mapped to one of them (`--network`)."""
    models = folder / "models"
    assert kit_main(["add", "scorer", "--task", "onnx", "--from", str(folder / "scorer.onnx"), "--models", str(models)]) == 0
    assert add(folder / "tabular.py", models, "--max-batch-size", "8") == 0
    for name, model in (("ledger", "tabular_scorer"), ("audit", "scorer")):
        assert add(Path(shutil.copy(folder / "tabular.py", folder / f"{name}.py")), models, "--network", f"scorer={model}") == 0
    return models


@pytest.mark.parametrize("profile", ["cpu", "gpu", "gpu-embedded"])
def test_a_network_mapped_to_another_spec_s_model_is_that_model(sharing, profile):
    models = plan(profile, specs=read_specs(sharing))
    assert "ledger_scorer" not in models and "audit_scorer" not in models
    assert {"tabular_scorer", "scorer"} <= set(models)
    for entry, model in (("ledger", "tabular_scorer"), ("audit", "scorer"), ("tabular", "tabular_scorer")):
        assert json.loads(models[entry].settings.networks)["scorer"]["model"] == model
        rows = json.loads(models[entry].settings.network_rows)
        assert rows == {"scorer": models[model].config.max_batch_size}, (entry, rows)
        assert models[entry].calls == (model,)


def test_a_network_model_missing_from_the_build_is_refused_by_name(sharing):
    specs = read_specs(sharing)
    with pytest.raises(RepositoryError, match="audit: it calls 'scorer', which is not in the repository; build the spec"):
        plan("cpu", specs={"audit": specs["audit"]})


@pytest.mark.parametrize(
    "option, words",
    [
        ("scorer=nowhere", "`networks` maps scorer to 'nowhere', which no spec beside it serves from a graph of its own"),
        ("scorer=pooler", "`networks` maps scorer to 'pooler', whose tensors"),
        ("ranker=scorer", "`networks` names 'ranker', which the module's NETWORKS lacks"),
    ],
)
def test_a_network_mapped_to_a_model_that_does_not_fit_names_the_key(folder, option, words, capsys):
    models = folder / "models"
    onnx_graphs.pooled_embeddings(folder / "pooler.onnx")
    for graph in ("scorer", "pooler"):
        assert kit_main(["add", graph, "--task", "onnx", "--from", str(folder / f"{graph}.onnx"), "--models", str(models)]) == 0
    capsys.readouterr()
    assert add(folder / "tabular.py", models, "--network", option) == 2
    error = capsys.readouterr().err
    assert "tabular.toml: " + words in error, error
    assert not (models / "tabular.toml").exists()


def test_a_network_option_that_is_not_a_pair_is_refused(folder):
    with pytest.raises(SystemExit, match="--network 'scorer' is not KEY=VALUE"):
        add(folder / "tabular.py", folder / "models", "--network", "scorer")


def test_a_model_built_alone_takes_the_models_its_networks_are_mapped_to(sharing):
    """What a benchmark of one pipeline builds (perf sweep --model): its entry, from the specs beside it, and the
    models its networks are mapped to, which other specs bring."""
    specs = read_specs(sharing)
    assert sorted(plan("cpu", specs, models=["ledger"])) == ["ledger", "tabular_scorer"]
    assert sorted(plan("cpu", specs, models=["audit"])) == ["audit", "scorer"]
    assert sorted(plan("cpu", specs, models=["tabular"])) == ["tabular", "tabular_scorer"]
