"""The door sends large tensors to a Triton beside it through system shared memory (door.shared_memory): each answer
equals Triton's to the same image sent in the gRPC message; what does not fit goes in the message; a bad image fails
alone and gives its extent back; a region Triton lost is registered again; a Triton that refuses the registration (an
admin key the door lacks, as a remote one cannot map it) gets every tensor in the message."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from clients.door import DoorClient, DoorError
from door.shared_memory import PREFIX, SHM_DIR
from kit.server.runtime import ADMIN_HEADER, GRPC_ADMIN_HEADER
from tests.served.doors import metrics, running_door
from tests.served.reliability import own_server

MODEL = "resnet50"
SHARED, MESSAGE = 'door_large_tensors_total{via="shared_memory"}', 'door_large_tensors_total{via="message"}'
KEY = "shared-memory-admin-key"


def image(side: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((3, side, side), dtype=np.float32)


def tritons(url: str, pixels: np.ndarray) -> np.ndarray:
    """Triton's answer to the image sent in the gRPC message."""
    client = grpcclient.InferenceServerClient(url)
    try:
        tensor = grpcclient.InferInput("INPUT", [1, *pixels.shape], "FP32")
        tensor.set_data_from_numpy(pixels[np.newaxis])
        return client.infer(MODEL, [tensor]).as_numpy("PROBS")[0]
    finally:
        client.close()


def counts(door) -> tuple[float, float]:
    sampled = metrics(door)
    return sampled.get(SHARED, 0.0), sampled.get(MESSAGE, 0.0)


def regions(grpc_client, headers=None) -> set[str]:
    return set(grpc_client.get_system_shared_memory_status(headers=headers).regions)


def test_large_images_go_through_shared_memory_and_answer_as_in_the_message(server, grpc_client, door):
    images = [image(side, seed) for seed, side in enumerate([224, 160, 200, 40, 224, 131])]  # 40 x 40: 19 KiB
    expected = [tritons(server.options.grpc_url, pixels) for pixels in images]
    before = counts(door)
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(DoorClient(door.url).resnet50, images * 3))
    for i, answer in enumerate(answers):
        np.testing.assert_allclose(answer, expected[i % len(images)], rtol=1e-4, atol=1e-7, err_msg=f"image {i}")
    large = 3 * sum(pixels.nbytes >= 64 << 10 for pixels in images)
    assert counts(door) == (before[0] + large, before[1])  # the 64 MiB default holds every one in flight
    assert any(name.startswith(PREFIX) for name in regions(grpc_client))


def test_a_region_triton_lost_is_registered_again_and_the_request_answered(server, grpc_client, door):
    pixels = image(224, 11)
    client = DoorClient(door.url)
    client.resnet50(pixels)  # the door's region is registered
    ours = {name for name in regions(grpc_client) if name.startswith(PREFIX)}
    for name in ours:  # as a restarted Triton forgets every registration
        grpc_client.unregister_system_shared_memory(name)
    np.testing.assert_allclose(client.resnet50(pixels), tritons(server.options.grpc_url, pixels), rtol=1e-4, atol=1e-7)
    assert ours <= regions(grpc_client)
    before = counts(door)
    client.resnet50(pixels)
    assert counts(door) == (before[0] + 1, before[1])  # through shared memory again


def test_what_does_not_fit_goes_in_the_message_and_a_bad_image_fails_alone(server, grpc_client, tmp_path):
    fits, too_large = image(224, 1), image(300, 2)  # 0.6 MB; 1.08 MB, more than the door's 1 MiB
    bad = image(224, 3)
    bad[1, 7, 7] = np.nan
    expected = [tritons(server.options.grpc_url, pixels) for pixels in (fits, too_large)]
    with running_door(server.options.grpc_url, tmp_path / "door.log", env={"DOOR_SHARED_MEMORY_MB": "1"}) as door:
        client = DoorClient(door.url)
        mine = {name for name in regions(grpc_client) if name.split("-")[2] == str(door.process.pid)}
        assert len(mine) == 1 and (SHM_DIR / next(iter(mine))).exists()
        with ThreadPoolExecutor(6) as pool:
            good = [pool.submit(client.resnet50, pixels) for pixels in [fits, too_large] * 6]
            refused = pool.submit(client.resnet50, bad)
            with pytest.raises(DoorError) as caught:
                refused.result()
            for i, answer in enumerate(good):
                np.testing.assert_allclose(answer.result(), expected[i % 2], rtol=1e-4, atol=1e-7)
        assert caught.value.status == 422, caught.value
        shared, message = counts(door)
        assert shared + message == 13 and message >= 6  # each of the too large ones, and the fits that found it full
        for _ in range(3):  # every extent was given back, the bad image's too: each fits again
            client.resnet50(fits)
        assert counts(door) == (shared + 3, message)
    assert not mine & regions(grpc_client)  # a door that stops unregisters its region and removes the file
    assert not (SHM_DIR / next(iter(mine))).exists()


def test_a_small_dev_shm_is_left_to_triton(server, tmp_path):
    """A region that would take more than a quarter of /dev/shm's free space (a container's is 64 MB) is not made:
    Triton's Python stubs grow into it."""
    too_much = str(shutil.disk_usage(SHM_DIR).free // (3 << 20))  # MiB: a third of what is free
    with running_door(server.options.grpc_url, tmp_path / "door.log", env={"DOOR_SHARED_MEMORY_MB": too_much}) as door:
        pixels = image(224, 6)
        np.testing.assert_allclose(
            DoorClient(door.url).resnet50(pixels), tritons(server.options.grpc_url, pixels), rtol=1e-4, atol=1e-7
        )
        assert counts(door) == (0.0, 1.0)
        assert "it is left to Triton" in door.log.read_text()
        assert not list(SHM_DIR.glob(f"{PREFIX}{door.process.pid}-*"))


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A Triton whose shared-memory API needs a key, serving ResNet-50."""
    restricted = f"--grpc-restricted-protocol=shared-memory:{ADMIN_HEADER}={KEY}"
    with own_server(tmp_path_factory.mktemp("guarded-shm"), models=(MODEL,), extra_args=[restricted]) as server:
        yield server


@pytest.mark.parametrize("key", [None, KEY])
def test_a_triton_that_refuses_the_registration_gets_tensors_in_the_message(guarded, key, tmp_path: Path):
    pixels = image(224, 5)
    env = {"DOOR_TRITON_ADMIN_KEY": key} if key else {}
    with running_door(guarded.options.grpc_url, tmp_path / "door.log", env=env) as door:
        answer = DoorClient(door.url).resnet50(pixels)
        np.testing.assert_allclose(answer, tritons(guarded.options.grpc_url, pixels), rtol=1e-4, atol=1e-7)
        assert counts(door) == ((1.0, 0.0) if key else (0.0, 1.0))
        assert ("did not map" in door.log.read_text()) is (key is None)
        client = grpcclient.InferenceServerClient(guarded.options.grpc_url)
        held = regions(client, {GRPC_ADMIN_HEADER: KEY})
        client.close()
        assert any(name.startswith(PREFIX) for name in held) is (key is not None)
