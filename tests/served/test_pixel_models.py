"""A classifier of normalised pixels a user brings (`kit add NAME --task image-classification --input pixels --from DIR`,
nothing else; PIXEL_CLASSIFIERS): a ResNet checkpoint served as ResNet-50 is, beside the shipped models. Images of any
size in; each answer equals PyTorch on that image alone, unpadded, though concurrent images of different sizes are
merged into padded runs; a bad image fails alone; the door serves it at its route."""

from __future__ import annotations

import base64
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from kit.control.configs import REPO_ROOT
from kit.control.exports import export_python
from kit.control.image_task import names
from tests.served.conftest import PIXEL_CLASSIFIERS
from tests.served.doors import assert_problem, call
from tests.served.statistics import counted, executions

MODEL = "shapes"
# Served (padded among other sizes, ONNX Runtime) against PyTorch on each image alone.
ATOL = 1e-5
SHAPES = [(40, 52), (64, 64), (33, 70), (96, 48), (57, 40), (32, 32)]
IMAGES = [np.random.default_rng(i).standard_normal((3, h, w), dtype=np.float32) for i, (h, w) in enumerate(SHAPES)]


@pytest.fixture(scope="module")
def references(checkpoints) -> list[list[float]]:
    """Each image through the checkpoint in PyTorch (tests.checkpoints classify-pixels, export venv)."""
    checkpoint = checkpoints / PIXEL_CLASSIFIERS[MODEL]
    command = [export_python(), "-m", "tests.checkpoints", "classify-pixels", "--model", str(checkpoint)]
    sent = json.dumps([image.tolist() for image in IMAGES])
    done = subprocess.run(command, cwd=REPO_ROOT, input=sent, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def classify(url: str, batch: np.ndarray) -> np.ndarray:
    """One request of `batch` [images, 3, height, width]: PROBS [images, labels]."""
    client = grpcclient.InferenceServerClient(url)
    try:
        tensor = grpcclient.InferInput("INPUT", list(batch.shape), "FP32")
        tensor.set_data_from_numpy(batch)
        return client.infer(MODEL, [tensor]).as_numpy("PROBS")
    finally:
        client.close()


def test_concurrent_images_of_different_sizes_equal_pytorch_alone_and_share_executions(
    server, grpc_client, brought_models, references
):
    spread = np.ptp(np.array(references), axis=0).max()
    assert spread > 10 * ATOL, f"the reference answers hardly differ between images ({spread:.2g}): the check is blind"
    before = executions(grpc_client, MODEL)
    sent = list(range(len(IMAGES))) * 16
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda i: classify(server.options.grpc_url, IMAGES[i][np.newaxis])[0], sent))
    requests, runs = counted(grpc_client, {MODEL: before}, {MODEL: len(sent)})[MODEL]
    assert requests == len(sent)
    assert runs < requests, f"{runs} executions for {requests} images: none carried more than one"
    for i, answer in zip(sent, answers):
        np.testing.assert_allclose(answer, references[i], atol=ATOL, err_msg=f"{SHAPES[i]}")
    backbone = names(brought_models[MODEL])["backbone"]
    assert executions(grpc_client, backbone)[0] > 0, "the entry never called its backbone"


def test_the_images_of_one_request_equal_each_sent_alone(server, references):
    stacked = np.stack([IMAGES[0], IMAGES[0] * 0.5, -IMAGES[0]])
    alone = [classify(server.options.grpc_url, image[np.newaxis])[0] for image in stacked]
    np.testing.assert_allclose(classify(server.options.grpc_url, stacked), alone, atol=ATOL)
    np.testing.assert_allclose(alone[0], references[0], atol=ATOL)


@pytest.mark.parametrize("bad", ["nan", "empty side"])
def test_a_bad_image_fails_alone_among_good_ones(bad, server, references):
    image = IMAGES[1].copy()
    if bad == "nan":
        image[0, 3, 3] = np.nan
    else:
        image = image[:, :0, :]
    with ThreadPoolExecutor(12) as pool:
        good = [pool.submit(classify, server.options.grpc_url, data[np.newaxis]) for data in IMAGES * 2]
        refused = pool.submit(classify, server.options.grpc_url, image[np.newaxis])
        with pytest.raises(InferenceServerException) as caught:
            refused.result()
        for i, answer in enumerate(good):
            np.testing.assert_allclose(answer.result()[0], references[i % len(IMAGES)], atol=ATOL)
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT", caught.value
    assert server.is_ready()


def test_the_door_serves_it_at_its_route_with_its_openapi_entry(door, brought_models, references, checkpoints):
    """Its classes by the checkpoint's own label names (config.json's id2label), in the answer and the OpenAPI entry."""
    route = brought_models[MODEL].door_route
    id2label = json.loads((checkpoints / PIXEL_CLASSIFIERS[MODEL] / "config.json").read_text())["id2label"]
    labels = [id2label[str(i)] for i in range(len(id2label))]
    image = IMAGES[2]
    body = {"shape": list(image.shape), "data": base64.b64encode(image.astype("<f4").tobytes()).decode("ascii")}
    answer = call(door, "POST", route, json=body)
    assert answer.status == 200, answer.data[:300]
    np.testing.assert_allclose(answer.json()["probs"], references[2], atol=ATOL)
    top = answer.json()["top"]
    assert sorted(c["index"] for c in top) == list(range(len(labels)))  # four classes: the top five hold them all
    assert [c["label"] for c in top] == [labels[c["index"]] for c in top]
    wrong = call(door, "POST", route, json={"shape": [3, 4, 4], "data": body["data"]})
    assert_problem(wrong, 400, "malformed-body")
    document = call(door, "GET", "/openapi.json").json()
    assert route in document["paths"]
    score = document["components"]["schemas"]["ShapesClassScore"]["properties"]["label"]
    assert sorted(score["enum"]) == sorted(labels), score
