"""Image decoding: raw bytes or base64, EXIF orientation, limits checked before decoding."""

import base64

import numpy as np
import pytest
from PIL import Image

from kit.pipelines.encoded_images import decode_image, decode_request_image, image_bytes
from kit.pipelines.errors import InputError
from samples.images import encode


def picture(width=40, height=20):
    """Left half red, right half blue: orientation is visible in the pixels."""
    pixels = np.zeros((height, width, 3), np.uint8)
    pixels[:, : width // 2] = (255, 0, 0)
    pixels[:, width // 2 :] = (0, 0, 255)
    return Image.fromarray(pixels)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "BMP", "WEBP"])
def test_every_supported_format_decodes_to_bgr(fmt):
    image = decode_image(encode(picture(), fmt, **({"quality": 95} if fmt in ("JPEG", "WEBP") else {})))
    assert image.shape == (20, 40, 3) and image.dtype == np.uint8
    assert image[10, 5, 2] > 200 and image[10, 5, 0] < 60  # red is the last channel in BGR


def test_base64_forms_decode_like_the_bytes():
    raw = encode(picture())
    text = base64.b64encode(raw)
    expected = decode_image(raw)
    for variant in (
        text,
        b"data:image/png;base64," + text,
        text.rstrip(b"="),
        base64.urlsafe_b64encode(raw),
        b"\n".join(text[i : i + 76] for i in range(0, len(text), 76)),
    ):
        np.testing.assert_array_equal(decode_image(variant), expected)


def test_exif_orientation_turns_the_picture_upright():
    upright = picture()
    rotated = upright.transpose(Image.Transpose.ROTATE_90)  # what the camera stored
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    image = decode_image(encode(rotated, "JPEG", quality=95, exif=exif.tobytes()))
    assert image.shape == (20, 40, 3)
    assert image[10, 5, 2] > 200 and image[10, 35, 0] > 200


def test_transparency_is_flattened_onto_white():
    rgba = Image.new("RGBA", (8, 8), (0, 0, 0, 0))
    np.testing.assert_array_equal(decode_image(encode(rgba)), np.full((8, 8, 3), 255, np.uint8))


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"\x00\xffnot an image" * 10, "not a JPEG, PNG, BMP or WebP image"),
        (b"abc$def", "text but not base64: '$'"),
        (b"abcde", "not valid base64"),
        (b"data:image/png;base64,", "base64 text of nothing"),
    ],
)
def test_unusable_input_names_the_problem(data, message):
    with pytest.raises(InputError, match=message.replace("$", r"\$")):
        decode_image(data)


def test_truncated_image_is_an_error_not_a_grey_picture():
    raw = encode(picture(400, 300), "JPEG")
    with pytest.raises(InputError, match="truncated"):
        decode_image(raw[: len(raw) // 2])


def test_pixel_limit_is_checked_from_the_header_before_decoding():
    raw = encode(Image.new("L", (3000, 2000)))
    with pytest.raises(InputError, match="3000x2000 = 6000000 pixels; the maximum is 5000000"):
        decode_image(raw, max_pixels=5_000_000)


def test_byte_limits_apply_to_raw_and_base64_text():
    raw = encode(picture(400, 300), "JPEG")
    with pytest.raises(InputError, match="maximum is 100 bytes"):
        image_bytes(raw, max_bytes=100)
    with pytest.raises(InputError, match="maximum is 100 bytes"):
        image_bytes(base64.b64encode(raw), max_bytes=100)


def test_request_tensor_holds_exactly_one_image():
    data = encode(picture())
    np.testing.assert_array_equal(decode_request_image(np.array([data], dtype=np.object_)), decode_image(data))
    with pytest.raises(InputError, match="IMAGE must hold exactly one image, got 2"):
        decode_request_image(np.array([data, data], dtype=np.object_))
    with pytest.raises(InputError, match="got 0"):
        decode_request_image(np.array([], dtype=np.object_))
