"""Bad images to `ocr` and `health_code` fail alone with a clear message; images with nothing to
read get an empty result; good images sent beside them are still answered; the server stays ready.

Errors (INVALID_ARG) where the client sent something that is not a usable image, so that a
mistake is never mistaken for "no text": empty bytes, bytes that are no image, a truncated JPEG, a
picture over the pixel limit, text that is not base64. Empty results where the image is fine and
simply holds no text: a 1x1 picture, a blank page.
"""

from __future__ import annotations

import base64

import pytest
import tritonclient.grpc as grpcclient
from PIL import Image
from tritonclient.utils import InferenceServerException

from clients.health_code import HealthCodeClient
from clients.ocr import OcrClient
from kit.pipelines.encoded_images import MAX_PIXELS
from samples.images import document, encode, health_code

JPEG = document(5, fmt="JPEG").data
HUGE_SIDE = int(MAX_PIXELS**0.5) + 1

ERRORS = {  # case: (image bytes, made when needed; what the error message must say)
    "empty": (lambda: b"", "IMAGE is empty"),
    "not an image": (lambda: b"\x00\x01binary junk\xff\xfe" * 20, "not a JPEG, PNG, BMP or WebP image"),
    "truncated jpeg": (lambda: JPEG[: len(JPEG) // 2], "truncated"),
    "over the pixel limit": (lambda: encode(Image.new("L", (HUGE_SIDE, HUGE_SIDE), 255)), f"the maximum is {MAX_PIXELS}"),
    "invalid base64": (lambda: base64.b64encode(JPEG)[:-8] + b"$%&*", "not base64"),
}
STATUS = {"grpc": "INVALID_ARGUMENT", "http": "400"}
EMPTY = {
    "1x1 image": encode(Image.new("RGB", (1, 1), "white")),
    "blank page": encode(Image.new("RGB", (800, 600), "white"), "JPEG"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_unusable_image_gets_a_clear_error(url, protocol, case):
    make, expected = ERRORS[case]
    data = make()
    for client in (OcrClient(url, protocol), HealthCodeClient(url, protocol)):
        with pytest.raises(InferenceServerException) as error:
            client.read(data)
        assert expected in error.value.message()
        assert STATUS[protocol] in str(error.value.status())
        client.close()


@pytest.mark.parametrize("case", list(EMPTY))
def test_image_without_text_gets_an_empty_result(url, protocol, case):
    ocr, codes = OcrClient(url, protocol), HealthCodeClient(url, protocol)
    assert ocr.read(EMPTY[case]) == []
    result = codes.read(EMPTY[case])
    assert result == {"color": "unknown", "qr": None, "texts": [], "fields": {"name": None, "datetime": None, "status": None}}
    ocr.close()
    codes.close()


def test_base64_text_of_a_good_image_is_read_like_its_bytes(server):
    client = OcrClient(server.options.grpc_url, "grpc")
    assert client.read(base64.b64encode(JPEG)) == client.read(JPEG)
    assert client.read(b"data:image/jpeg;base64," + base64.b64encode(JPEG)) == client.read(JPEG)
    client.close()


def test_bad_images_do_not_fail_good_ones_and_server_stays_ready(server):
    good = [health_code(400 + i, ["green", "yellow", "red"][i % 3]) for i in range(3)]
    bad = [make() for make, _ in ERRORS.values()]
    mixed = [shot.data for shot in good] + bad + list(EMPTY.values())
    client = HealthCodeClient(server.options.grpc_url, "grpc", concurrency=len(mixed))
    results = client.read_many(mixed)
    client.close()
    for shot, result in zip(good, results):
        assert not isinstance(result, Exception), result
        assert (result["color"], result["qr"]) == (shot.color, shot.qr)
    assert all(isinstance(r, InferenceServerException) for r in results[len(good) : len(good) + len(bad)])
    assert all(r["texts"] == [] for r in results[len(good) + len(bad) :])
    assert server.is_ready()
    status = grpcclient.InferenceServerClient(server.options.grpc_url)
    assert all(status.is_model_ready(m) for m in ("ocr", "health_code", "ocr_det", "ocr_cls", "ocr_rec"))
    status.close()
