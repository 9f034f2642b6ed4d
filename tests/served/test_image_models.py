"""Image classifiers a user brings as Hugging Face checkpoints (`kit add NAME --task image-classification --from DIR`,
nothing else; IMAGE_CLASSIFIERS): a ViT and a ConvNeXt with labels of their own, served on the real server beside the
shipped models. Images of any size and format in; each answer equals the checkpoint's own processor and PyTorch on
that image, concurrent images of different sizes share the classifier's executions, a bad image fails alone, and the
door and the generic client serve each by its labels."""

from __future__ import annotations

import base64
import io
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from PIL import Image
from tritonclient.utils import InferenceServerException

from clients.image import ImageClassifierClient
from kit.control.configs import REPO_ROOT, parameters
from kit.control.exports import export_python
from kit.control.image_task import names
from kit.control.repository import plan
from perf.sim.device import SIM
from tests.served.conftest import IMAGE_CLASSIFIERS
from tests.served.doors import assert_problem, call, client_on
from tests.served.statistics import counted, executions

# Served (the preprocessing in numpy, ONNX Runtime, batched) against the processor and PyTorch on each image alone.
ATOL = 1e-4
# (width, height, format, mode): sizes and aspect ratios the model does not take, a grey and a palette image.
SHAPES = [(40, 17, "PNG", "RGB"), (64, 64, "JPEG", "RGB"), (300, 120, "PNG", "L"), (33, 77, "BMP", "RGB"), (90, 50, "PNG", "P")]


def encoded(width: int, height: int, fmt: str, mode: str, seed: int) -> bytes:
    """A smooth generated picture (gradients and a disc), so that resampling differs as it does on photographs."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    centre = rng.uniform(0.2, 0.8, 2) * (width, height)
    disc = ((x - centre[0]) ** 2 + (y - centre[1]) ** 2) < (min(width, height) / 3) ** 2
    pixels = np.stack([x * 255 / width, y * 255 / height, 255 * disc], axis=-1) * rng.uniform(0.5, 1.0, 3)
    image = Image.fromarray(pixels.astype(np.uint8), "RGB").convert(mode)
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


IMAGES = [encoded(*shape, seed=i) for i, shape in enumerate(SHAPES)]


def pytorch(checkpoint, images: list[bytes]) -> list[list[float]]:
    """Each image through the checkpoint's processor and PyTorch (tests.checkpoints classify-images, export venv)."""
    command = [export_python(), "-m", "tests.checkpoints", "classify-images", "--model", str(checkpoint)]
    sent = json.dumps([base64.b64encode(data).decode("ascii") for data in images])
    done = subprocess.run(command, cwd=REPO_ROOT, input=sent, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def label_names(checkpoints, model: str) -> list[str]:
    labels = json.loads((checkpoints / IMAGE_CLASSIFIERS[model] / "config.json").read_text())["id2label"]
    return [labels[str(i)] for i in range(len(labels))]


def classify_rows(url: str, model: str, images: list[bytes]) -> np.ndarray:
    """One request of a row per image: SCORES [images, labels]."""
    client = grpcclient.InferenceServerClient(url)
    try:
        tensor = grpcclient.InferInput("IMAGE", [len(images), 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[data] for data in images], dtype=np.object_))
        return client.infer(model, [tensor]).as_numpy("SCORES")
    finally:
        client.close()


def classify(url: str, model: str, data: bytes) -> np.ndarray:
    return classify_rows(url, model, [data]).reshape(-1)


@pytest.fixture(scope="module")
def references(checkpoints) -> dict[str, list[list[float]]]:
    return {model: pytorch(checkpoints / checkpoint, IMAGES) for model, checkpoint in IMAGE_CLASSIFIERS.items()}


@pytest.mark.parametrize("model", sorted(IMAGE_CLASSIFIERS))
def test_served_probabilities_equal_the_processor_and_pytorch_on_images_of_any_size(model, server, references):
    for data, shape, want in zip(IMAGES, SHAPES, references[model]):
        got = classify(server.options.grpc_url, model, data)
        np.testing.assert_allclose(got, want, atol=ATOL, err_msg=f"{model}: {shape}")
    spread = np.ptp(np.array(references[model]), axis=0).max()
    assert spread > 10 * ATOL, f"the reference answers hardly differ between images ({spread:.2g}): the check is blind"


@pytest.mark.parametrize("model", sorted(IMAGE_CLASSIFIERS))
def test_the_images_of_one_request_equal_each_sent_alone(model, server, references):
    scores = classify_rows(server.options.grpc_url, model, IMAGES)
    assert scores.shape == (len(IMAGES), len(references[model][0]))
    np.testing.assert_allclose(scores, references[model], atol=ATOL)


@pytest.mark.parametrize("model", sorted(IMAGE_CLASSIFIERS))
def test_concurrent_images_of_different_sizes_share_the_classifiers_executions(
    model, grpc_client, server, brought_models, references
):
    classifier = names(brought_models[model])["classifier"]
    before = executions(grpc_client, classifier)
    sent = list(range(len(IMAGES))) * 16
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda i: classify(server.options.grpc_url, model, IMAGES[i]), sent))
    requests, runs = counted(grpc_client, {classifier: before}, {classifier: len(sent)})[classifier]
    assert requests == len(sent)
    assert runs < requests, f"{runs} executions for {requests} images: none carried more than one"
    for i, answer in zip(sent, answers):
        np.testing.assert_allclose(answer, references[model][i], atol=ATOL)


@pytest.mark.parametrize("bad", [b"not an image at all", IMAGES[0][:40], b""], ids=["text", "truncated", "empty"])
def test_a_bad_image_fails_alone_among_good_ones(bad, server, references):
    model = "pets"
    with ThreadPoolExecutor(12) as pool:
        good = [pool.submit(classify, server.options.grpc_url, model, data) for data in IMAGES * 2]
        refused = pool.submit(classify, server.options.grpc_url, model, bad)
        with pytest.raises(InferenceServerException) as caught:
            refused.result()
        for i, answer in enumerate(good):
            np.testing.assert_allclose(answer.result(), references[model][i % len(IMAGES)], atol=ATOL)
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT", caught.value
    assert "IMAGE" in caught.value.message(), caught.value.message()
    assert server.is_ready()


@pytest.mark.parametrize("model", sorted(IMAGE_CLASSIFIERS))
def test_the_door_serves_an_image_classifier_by_its_labels(model, door, brought_models, checkpoints, references):
    labels = label_names(checkpoints, model)
    route = brought_models[model].door_route
    for data, want in zip(IMAGES, references[model]):
        as_json = call(door, "POST", route, json={"image": base64.b64encode(data).decode("ascii")})
        as_form = call(door, "POST", route, fields={"image": ("picture", data, "application/octet-stream")})
        assert as_json.status == 200 and as_form.status == 200, (as_json.data[:300], as_form.data[:300])
        answer = as_json.json()
        assert as_form.json() == answer
        assert list(answer["scores"]) == labels and answer["label"] == labels[int(np.argmax(want))]
        np.testing.assert_allclose([answer["scores"][label] for label in labels], want, atol=ATOL)
    document = call(door, "GET", "/openapi.json").json()
    result = document["paths"][route]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    schema = document["components"]["schemas"][result["$ref"].rsplit("/", 1)[1]]
    assert schema["properties"]["label"]["enum"] == labels


def test_the_door_refuses_a_bad_image_with_a_clear_4xx(door, brought_models):
    answer = call(door, "POST", brought_models["pets"].door_route, json={"image": base64.b64encode(b"no image").decode()})
    assert 400 <= answer.status < 500, answer.data[:300]
    assert_problem(answer, answer.status, answer.json()["type"].rsplit(":", 1)[1])


@pytest.mark.parametrize("protocol", ["grpc", "http", "door"])
def test_the_generic_client_answers_by_label_on_every_transport(protocol, server, door, references, checkpoints):
    """clients.image with nothing but the model's name: the labels from the served config (or the door's answer)."""
    with client_on(protocol, server, door, ImageClassifierClient, "scenes") as client:
        results = client.classify_many(IMAGES)
    for result, want in zip(results, references["scenes"]):
        assert list(result.scores) == label_names(checkpoints, "scenes")
        np.testing.assert_allclose(list(result.scores.values()), want, atol=ATOL)


@pytest.mark.parametrize("profile", ["cpu", "gpu", "gpu-embedded", SIM / "sim-h100.json"])
def test_an_image_classifier_is_placed_in_every_profile_as_resnets_backbone_is(profile, brought_models):
    """Built for each profile, the graph model runs where ResNet-50's backbone runs (the simulated device aside,
    which only a measured curve can drive) and serves the export's graph; the pixels model runs on the CPU."""
    planned = plan(profile, specs=brought_models)
    configs = {name: model.written() for name, model in planned.items()}
    files = {name: model.files for name, model in planned.items()}
    for model in IMAGE_CLASSIFIERS:
        own = names(brought_models[model])
        classifier, backbone = configs[own["classifier"]], configs["resnet50_backbone"]
        if profile != SIM / "sim-h100.json":
            assert (classifier.backend, list(classifier.instance_group)) == (backbone.backend, list(backbone.instance_group))
        served = parameters(classifier).get("onnx_model") or parameters(classifier).get("torch_model")
        assert served is None or served in files[own["classifier"]], f"{profile}: {served} is not in the version folder"
        assert all(group.kind == group.KIND_CPU for group in configs[own["pixels"]].instance_group)
