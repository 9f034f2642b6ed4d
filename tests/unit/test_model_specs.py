"""Model specs (kit.control.specs) and `kit add` (kit.control.models): a mistake in any key stops at `kit add` or
the build with a message that names the spec, the key and the fix; a good spec becomes a model of every profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import RepositoryError
from kit.control.models import main as kit_main
from kit.control.repository import servable_specs
from kit.control.specs import TASK_KEYS, SpecError, read_spec, read_specs
from kit.control.tasks import TASKS
from tests import onnx_graphs
from tests.profiles import configs


@pytest.fixture(scope="module")
def graphs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("graphs")
    onnx_graphs.mlp(root / "mlp.onnx")
    onnx_graphs.pooled_embeddings(root / "pooled.onnx")
    onnx_graphs.fixed_batch(root / "fixed.onnx")
    onnx_graphs.mixing_rows(root / "mixing.onnx")
    (root / "notes.onnx").write_text("not a graph")
    (root / "labelled").mkdir()  # enough of a checkpoint for the checks that come before its export
    (root / "labelled" / "config.json").write_text(json.dumps({"model_type": "bert", "id2label": {"0": "a", "1": "b"}}))
    return root


def spec_file(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


GOOD = 'task = "onnx"\nsource = "../mlp.onnx"\n'
TEXT = 'task = "text-classification"\nsource = "../labelled"\n'
EMBED = 'task = "feature-extraction"\nsource = "../labelled"\n'
IMAGE = 'task = "image-classification"\nsource = "../labelled"\n'


@pytest.mark.parametrize(
    "text, key, words",
    [
        (GOOD + "max_batch_sise = 8\n", "max_batch_sise", "is not a spec key"),
        ('source = "../mlp.onnx"\n', "task", "is missing"),
        ('task = "onnx"\n', "source", "is missing"),
        ('task = "speech"\nsource = "../mlp.onnx"\n', "task", "the tasks are onnx"),
        ('task = "onnx"\nsource = "../nowhere.onnx"\n', "source", "not a file"),
        ('task = "onnx"\nsource = "../notes.onnx"\n', "source", "is not an ONNX graph"),
        (GOOD + 'max_batch_size = "8"\n', "max_batch_size", "takes a whole number"),
        (GOOD + "max_batch_size = true\n", "max_batch_size", "takes a whole number"),
        (GOOD + "max_batch_size = 5000\n", "max_batch_size", "0 (no batching) to 1024"),
        (GOOD + "max_queue_delay_microseconds = -1\n", "max_queue_delay_microseconds", "negative"),
        (GOOD + "preferred_batch_size = [8, 128]\n", "preferred_batch_size", "holds [128]"),
        (GOOD + 'preferred_batch_size = ["8"]\n', "preferred_batch_size", "list of whole numbers"),
        (GOOD + "instances = 0\n", "instances", "at least one instance"),
        (GOOD + "queue_timeout_seconds = 0\n", "queue_timeout_seconds", "not positive"),
        (GOOD + 'route = "/scores"\n', "route", "/v1/my-model"),
        (GOOD + 'route = "/v1/embeddings"\n', "route", "a route of OpenAI's API on the door"),
        ('task = "onnx"\nsource = "../fixed.onnx"\n', "max_batch_size", "no dynamic first axis"),
        (GOOD + "max_chars = 300\n", "max_chars", "is not a key of the onnx task"),
        ('task = "text-classification"\nsource = "../mlp.onnx"\n', "source", "not a checkpoint folder"),
        (TEXT + "max_chars = -1\n", "max_chars", "is negative"),
        (TEXT + "bucket_count = 0\n", "bucket_count", "at least one length"),
        (TEXT + 'labels = ["a"]\n', "labels", "names 1 labels; the checkpoint has 2"),
        (TEXT + "labels = [1, 2]\n", "labels", "a list of strings"),
        (TEXT + 'pooling = "mean"\n', "pooling", "is not a key of the text-classification task"),
        (TEXT + 'score_label = "c"\n', "score_label", "is 'c', not a label of the checkpoint; it is one of a, b"),
        (TEXT + 'labels = ["x", "y"]\nscore_label = "a"\n', "score_label", "it is one of x, y"),
        (GOOD + 'score_label = "a"\n', "score_label", "is not a key of the onnx task"),
        (EMBED + 'score_label = "a"\n', "score_label", "is not a key of the feature-extraction task"),
        (EMBED + 'pooling = "max"\n', "pooling", "one of mean, cls"),
        (EMBED + 'normalize = "yes"\n', "normalize", "takes true or false"),
        (EMBED + "normalize = 1\n", "normalize", "takes true or false"),
        (EMBED + 'labels = ["a"]\n', "labels", "is not a key of the feature-extraction task"),
        ('task = "feature-extraction"\nsource = "../mlp.onnx"\n', "source", "not a checkpoint folder"),
        ('task = "image-classification"\nsource = "../mlp.onnx"\n', "source", "not a checkpoint folder"),
        (IMAGE + "max_batch_size = 0\n", "max_batch_size", "batches the images of concurrent requests"),
        (IMAGE + "max_chars = 300\n", "max_chars", "is not a key of the image-classification task"),
        (IMAGE + 'input = "video"\n', "input", "it is one of image, pixels"),
        (IMAGE + 'merge_policy = "cost"\n', "merge_policy", 'is for images sent as pixels; set input = "pixels"'),
        (IMAGE + 'input = "pixels"\nmerge_policy = "greedy"\n', "merge_policy", "one of none, equal_shapes, paddle, cost"),
        (IMAGE + 'input = "pixels"\nmax_image_pixels = 0\n', "max_image_pixels", "at least one pixel"),
        (IMAGE + "num_labels = -2\n", "num_labels", "is negative"),
        (TEXT + 'input = "pixels"\n', "input", "is not a key of the text-classification task"),
    ],
)
def test_a_mistake_in_a_spec_names_the_spec_and_the_key(graphs, tmp_path, text, key, words):
    path = spec_file(graphs / tmp_path.name, "scores", text)
    with pytest.raises(SpecError) as caught:
        configs("cpu", specs=read_specs(path.parent))
    message = str(caught.value)
    assert str(path) in message and f"`{key}`" in message and words in message, message


def test_a_spec_is_read_with_the_tasks_the_kit_plans():
    # A spec's task is refused when the spec is read, from specs' list; kit.control.tasks plans each of them.
    assert list(TASK_KEYS) == list(TASKS)


def test_a_spec_that_is_not_toml_says_so(tmp_path):
    with pytest.raises(SpecError, match="not TOML"):
        read_spec(spec_file(tmp_path, "broken", "task = onnx\n"))


def test_two_specs_on_one_route_are_refused(graphs, tmp_path):
    folder = graphs / tmp_path.name
    spec_file(folder, "first", GOOD + 'route = "/v1/scores"\n')
    spec_file(folder, "second", GOOD + 'route = "/v1/scores"\n')
    with pytest.raises(SpecError, match="/v1/scores is also first's"):
        read_specs(folder)


def test_a_spec_may_not_take_a_shipped_model_s_name(graphs, tmp_path):
    folder = graphs / tmp_path.name
    spec_file(folder, "radar", GOOD)
    with pytest.raises(RepositoryError, match="a model the kit ships"):
        configs("cpu", specs=read_specs(folder))
    assert kit_main(["add", "resnet50", "--task", "onnx", "--from", str(graphs / "mlp.onnx"), "--models", str(folder)]) == 2


def test_kit_add_refuses_a_graph_whose_rows_change_each_other(graphs, tmp_path, capsys):
    args = ["add", "centred", "--task", "onnx", "--from", str(graphs / "mixing.onnx"), "--models", str(tmp_path)]
    assert kit_main(args) == 2
    error = capsys.readouterr().err
    assert "`max_batch_size`" in error and "change each other's centred" in error
    assert not (tmp_path / "centred.toml").exists(), "a refused model leaves no spec behind"
    assert kit_main([*args, "--max-batch-size", "0"]) == 0, "unbatched, the same graph is served"


def test_kit_add_writes_only_what_differs_from_the_defaults(graphs, tmp_path):
    assert kit_main(["add", "pooled", "--task", "onnx", "--from", str(graphs / "pooled.onnx"), "--models", str(tmp_path)]) == 0
    text = (tmp_path / "pooled.toml").read_text()
    assert text.splitlines() == ['task = "onnx"', f'source = "{graphs / "pooled.onnx"}"']
    assert kit_main(["add", "pooled", "--task", "onnx", "--from", str(graphs / "pooled.onnx"), "--models", str(tmp_path)]) == 2


@pytest.mark.parametrize("profile, backend", [("cpu", "python"), ("gpu", "onnxruntime"), ("gpu-embedded", "python")])
def test_a_spec_becomes_a_batched_model_of_every_profile(graphs, tmp_path, profile, backend):
    spec_file(graphs / tmp_path.name, "pooled", 'task = "onnx"\nsource = "../pooled.onnx"\nmax_batch_size = 16\n')
    config = configs(profile, specs=read_specs(graphs / tmp_path.name))["pooled"]
    assert config.backend == backend and config.max_batch_size == 16
    assert [(t.name, mc.DataType.Name(t.data_type), list(t.dims)) for t in config.input] == [
        ("ids", "TYPE_INT64", [-1]),
        ("mask", "TYPE_FP32", [-1]),
    ]
    outputs = [(t.name, list(t.dims), t.HasField("reshape")) for t in config.output]
    assert outputs == [("pooled", [6], False), ("count", [1], True)]
    assert json.loads(config.parameters["door_axes"].string_value) == {"ids": ["length"], "mask": ["length"]}
    policy = config.dynamic_batching.default_queue_policy
    assert 0 < policy.max_queue_size <= 4096 and policy.timeout_action == mc.ModelQueuePolicy.REJECT


def test_a_server_leaves_out_a_bad_spec_and_serves_the_others(graphs, tmp_path):
    folder = graphs / tmp_path.name
    spec_file(folder, "good", GOOD)
    spec_file(folder, "bad", 'task = "onnx"\nsource = "../fixed.onnx"\n')
    specs, refused = servable_specs(folder, "cpu")
    assert list(specs) == ["good"]
    assert len(refused) == 1 and "bad.toml" in refused[0] and "`max_batch_size`" in refused[0]


def test_kit_add_refuses_a_checkpoint_the_exporter_cannot_load_and_writes_no_spec(tmp_path, capsys):
    checkpoint = tmp_path / "foreign"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    args = ["add", "foreign", "--task", "text-classification", "--from", str(checkpoint), "--models", str(tmp_path / "models")]
    assert kit_main(args) == 2
    error = capsys.readouterr().err
    assert "foreign.toml: `source` cannot be exported as a sequence classifier" in error and "no-such-architecture" in error
    assert not (tmp_path / "models" / "foreign.toml").exists()


def test_kit_add_refuses_a_text_checkpoint_as_an_image_classifier_and_writes_no_spec(tmp_path, capsys):
    checkpoint = tmp_path / "words"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(
        json.dumps({"model_type": "bert", "architectures": ["BertForSequenceClassification"]})
    )
    args = ["add", "words", "--task", "image-classification", "--from", str(checkpoint), "--models", str(tmp_path / "models")]
    assert kit_main(args) == 2
    error = capsys.readouterr().err
    assert "words.toml: `source` cannot be exported as an image classifier" in error and "not an image classifier" in error
    assert not (tmp_path / "models" / "words.toml").exists()


def test_kit_add_refuses_a_checkpoint_of_pixels_that_is_no_resnet_and_writes_no_spec(tmp_path, capsys):
    """Only a ResNet's graph is exported for padded images of any size: another checkpoint stops at `kit add`."""
    checkpoint = tmp_path / "vision"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "vit", "architectures": ["ViTForImageClassification"]}))
    args = ["add", "vision", "--task", "image-classification", "--input", "pixels", "--from", str(checkpoint)]
    assert kit_main([*args, "--models", str(tmp_path / "models")]) == 2
    error = capsys.readouterr().err
    assert "vision.toml: `source` cannot be exported as a ResNet image classifier" in error, error
    assert not (tmp_path / "models" / "vision.toml").exists()


def test_kit_list_shows_the_kits_own_specs_beside_the_users(graphs, tmp_path, capsys):
    """RADAR is a spec like a user's: `kit list` shows what the build derives from it, marked as shipped."""
    folder = graphs / tmp_path.name
    spec_file(folder, "scores", GOOD)
    assert kit_main(["list", "--models", str(folder)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "text-classification" in lines["radar"]
    assert "TEXT -> SCORE, CHUNK_SCORES, CHUNK_SPANS, TOKENS, CHUNKS  /v1/radar" in lines["radar"]
    assert lines["radar"].endswith("(shipped)") and not lines["scores"].endswith("(shipped)")
    assert "image-classification" in lines["resnet50"] and "INPUT -> PROBS  /v1/resnet50  (shipped)" in lines["resnet50"]
