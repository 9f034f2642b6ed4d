"""A real tritonserver for the whole session, on free ports, with the CPU repository built fresh."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from kit.control.configs import REPO_ROOT
from kit.control.exports import export_python
from kit.control.models import main as kit_main
from kit.control.repository import build
from kit.control.specs import ModelSpec, read_specs
from kit.server.runtime import ServerOptions, TritonServer
from tests import onnx_graphs
from tests.conftest import ARTIFACTS
from tests.radar_reference import direct_scorer
from tests.served.doors import running_door

# Users' models served beside the shipped ones: graphs of shapes the kit was not written around, each added by
# `kit add` alone (docs/MODELS.md), by name -> the function that writes its graph.
BROUGHT = {"scorer": onnx_graphs.mlp, "pooler": onnx_graphs.pooled_embeddings}
# A graph whose rows change each other (a mean over the batch), added unbatched as `kit add` advises for it.
UNBATCHED = {"centred": onnx_graphs.mixing_rows}
# Text classifiers a user brings as Hugging Face checkpoints (tests.checkpoints, made in the export venv), each added by
# `kit add` alone: a BERT chunked at its token limit, a DistilBERT by 120 characters. Name -> checkpoint, arguments.
TEXT_CLASSIFIERS = {"topics": ("bert", []), "mood": ("distilbert", ["--max-chars", "120"])}
# A detector's single probability, as RADAR answers: the BERT's `science` label alone (`--score-label`).
TEXT_SCORERS = {"science_score": ("bert", ["--score-label", "science"])}
# Text encoders, added the same way (`--task feature-extraction`): a BERT whose sentence-transformers files say mean
# pooling and normalisation, chunked at its token limit, and an MPNet pooled by its first token, unnormalised, by 200
# characters. Name -> checkpoint, arguments, and the pooling and normalisation the served embeddings must have.
TEXT_ENCODERS = {
    "sentences": ("bert_encoder", [], "mean", True),
    "passages": ("mpnet", ["--pooling", "cls", "--max-chars", "200"], "cls", False),
}
# Cross-encoders, added the same way (`--task text-ranking`): a BERT (whose graph reads token types) chunking long
# documents at its token limit, scored by their best chunk, and a DistilBERT by 150 characters, scored by the chunks'
# length-weighted mean. Name -> checkpoint, arguments.
TEXT_RANKERS = {
    "reranker": ("bert_ranker", []),
    "passage_ranker": ("distilbert_ranker", ["--max-chars", "150", "--aggregation", "mean"]),
}
# Token classifiers, added the same way (`--task token-classification`): a BERT read in windows that share the default
# quarter of its limit, and a DeBERTa-v2 (SentencePiece-style tokenizer) with 24 tokens shared. Name -> checkpoint,
# arguments.
TOKEN_CLASSIFIERS = {"entities": ("bert_tagger", []), "pii": ("deberta_tagger", ["--stride", "24"])}

# Image classifiers, added the same way (`--task image-classification`): a ViT whose processor resizes to its size,
# and a ConvNeXt whose processor resizes the shorter side and crops (crop_pct). Name -> checkpoint.
IMAGE_CLASSIFIERS = {"pets": "vit", "scenes": "convnext"}
# A classifier of normalised pixels of any size, as ResNet-50 is served (`--input pixels`): a ResNet of four labels,
# its merges priced by the run times its export measured (the default `cost` policy). Name -> checkpoint.
PIXEL_CLASSIFIERS = {"shapes": "resnet"}

# Users' own pre- and post-processing (`--task pipeline`): a module of tests/pipelines/, copied beside its networks'
# graphs as a user keeps them, then added by `kit add` alone. Name -> each network's graph writer, by file.
PIPELINES = {
    "tabular": {"scorer.onnx": onnx_graphs.mlp},
    "words": {"pooler.onnx": onnx_graphs.pooled_embeddings, "scorer.onnx": onnx_graphs.mlp},
}
# Networks a pipeline serves as another spec's model (`--network`): words' scorer is the same graph as tabular's, so
# the two share tabular's model and its batcher. Name -> its options at `kit add`.
SHARED_NETWORKS = {"words": ["--network", "scorer=tabular_scorer"]}
PIPELINE_MODULES = REPO_ROOT / "tests" / "pipelines"


def write_weights(path: Path) -> Path:
    path.write_text("\n".join(str(w) for w in np.linspace(0.5, 2.0, 8)))
    return path


# An unbatched pipeline (one request whole: a signal in, its peaks out) with SETTINGS from the spec's parameters and
# a file it loads, as OCR's entries are. Name -> its files, and its options at `kit add`.
UNBATCHED_PIPELINES = {
    "peaks": (
        {"scorer.onnx": onnx_graphs.mlp, "weights.txt": write_weights},
        ["--max-batch-size", "0", "--parameter", "threshold=2.0"],
    ),
}


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> Path:
    """The generated checkpoints' folder (tests.checkpoints): bert/, distilbert/, bert_encoder/, mpnet/, bert_ranker/,
    distilbert_ranker/, bert_tagger/, deberta_tagger/, vit/, convnext/ and resnet/."""
    root = tmp_path_factory.mktemp("checkpoints")
    subprocess.run([export_python(), "-m", "tests.checkpoints", "make", "--out", str(root)], cwd=REPO_ROOT, check=True)
    return root


@pytest.fixture(scope="session")
def brought_models(tmp_path_factory, checkpoints) -> dict[str, ModelSpec]:
    root = tmp_path_factory.mktemp("brought")
    for name, write in (BROUGHT | UNBATCHED).items():
        graph = write(root / f"{name}.onnx")
        unbatched = ["--max-batch-size", "0"] if name in UNBATCHED else []
        args = ["add", name, "--task", "onnx", "--from", str(graph), "--models", str(root / "models"), *unbatched]
        assert kit_main(args) == 0
    for name, (checkpoint, options) in (TEXT_CLASSIFIERS | TEXT_SCORERS).items():
        args = ["add", name, "--task", "text-classification", "--from", str(checkpoints / checkpoint), *options]
        assert kit_main([*args, "--models", str(root / "models")]) == 0
    for name, (checkpoint, options, _, _) in TEXT_ENCODERS.items():
        args = ["add", name, "--task", "feature-extraction", "--from", str(checkpoints / checkpoint), *options]
        assert kit_main([*args, "--models", str(root / "models")]) == 0
    for name, (checkpoint, options) in TEXT_RANKERS.items():
        args = ["add", name, "--task", "text-ranking", "--from", str(checkpoints / checkpoint), *options]
        assert kit_main([*args, "--models", str(root / "models")]) == 0
    for name, (checkpoint, options) in TOKEN_CLASSIFIERS.items():
        args = ["add", name, "--task", "token-classification", "--from", str(checkpoints / checkpoint), *options]
        assert kit_main([*args, "--models", str(root / "models")]) == 0
    for name, checkpoint in IMAGE_CLASSIFIERS.items():
        args = ["add", name, "--task", "image-classification", "--from", str(checkpoints / checkpoint)]
        assert kit_main([*args, "--models", str(root / "models")]) == 0
    for name, checkpoint in PIXEL_CLASSIFIERS.items():
        args = ["add", name, "--task", "image-classification", "--input", "pixels", "--from", str(checkpoints / checkpoint)]
        assert kit_main([*args, "--models", str(root / "models")]) == 0
    batched = {name: (files, ["--max-batch-size", "16", *SHARED_NETWORKS.get(name, [])]) for name, files in PIPELINES.items()}
    pipelines = batched | UNBATCHED_PIPELINES
    for name, (files, options) in pipelines.items():
        folder = root / "pipelines" / name
        folder.mkdir(parents=True)
        module = Path(shutil.copy(PIPELINE_MODULES / f"{name}.py", folder))
        for file, write in files.items():
            write(folder / file)
        args = ["add", name, "--task", "pipeline", "--from", str(module), *options]
        assert kit_main([*args, "--models", str(root / "models")]) == 0
    return read_specs(root / "models")


@pytest.fixture(scope="session")
def server(tmp_path_factory, radar_artifacts, brought_models):
    root = tmp_path_factory.mktemp("triton")
    repository = root / "repository"
    build("cpu", repository, ARTIFACTS, specs=brought_models)
    options = ServerOptions.on_free_ports(repository)
    with TritonServer(options, log_path=root / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def door(server, tmp_path_factory):
    """A front door before the session's server, for the tests of one module."""
    with running_door(server.options.grpc_url, tmp_path_factory.mktemp("door") / "door.log") as running:
        yield running


@pytest.fixture(scope="session")
def repository(server) -> Path:
    return server.options.repository


@pytest.fixture(params=["grpc", "http"])
def protocol(request) -> str:
    return request.param


@pytest.fixture
def url(server, protocol) -> str:
    return server.options.grpc_url if protocol == "grpc" else server.options.http_url


@pytest.fixture(scope="session")
def grpc_client(server):
    client = grpcclient.InferenceServerClient(server.options.grpc_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def http_client(server):
    client = httpclient.InferenceServerClient(server.options.http_url, concurrency=8)
    yield client
    client.close()


@pytest.fixture(scope="session")
def reference(radar_artifacts):
    return direct_scorer(radar_artifacts)
