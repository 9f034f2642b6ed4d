"""An image from a request, checked the cheap way before Triton sees it: its size in bytes, then its
format and pixel count from the header alone (Pillow's lazy open), never a decoded pixel. The base64
rules and the formats are the image models' own (kit.pipelines.encoded_images), so the door accepts what
the model would."""

from __future__ import annotations

import binascii
import io
import warnings

import pybase64
from PIL import Image, UnidentifiedImageError

from door.problems import Problem
from door.schemas import base64_cap
from kit.pipelines.encoded_images import FORMATS, decode_base64
from kit.pipelines.errors import InputError


def strict_base64(text: str) -> bytes:
    """Padded standard base64, nothing else (schemas.PADDED_BASE64 says so to clients), decoded with SIMD: at
    CPython's speed the decoding was 40% of a raw float32 image's cost to the door."""
    return pybase64.b64decode(text, validate=True)


def from_base64(text: str, max_bytes: int) -> bytes:
    """The image in base64 text (standard or URL-safe, a data: URL allowed). What clients send, padded standard
    base64, is decoded with SIMD; only what that refuses goes to the kit's lenient decoder, which names the fault."""
    if len(text) > base64_cap(max_bytes):
        raise Problem(
            413, "image-too-large", f"the image's base64 text is {len(text)} characters; the image may be {max_bytes} bytes"
        )
    try:
        raw = strict_base64(text)
        if raw:
            return raw
    except (binascii.Error, ValueError):
        pass
    try:
        return decode_base64(text.encode("ascii", "replace"))
    except InputError as exc:
        raise Problem(400, "malformed-body", str(exc).replace("IMAGE", "image")) from None


def checked(data: bytes, max_bytes: int, max_pixels: int) -> bytes:
    """`data` itself, once its size, format and pixel count are within the model's limits."""
    if not data:
        raise Problem(422, "invalid-request", "the image is empty")
    if len(data) > max_bytes:
        raise Problem(413, "image-too-large", f"the image is {len(data)} bytes; the model takes at most {max_bytes}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the pixel limit below is lower
            with Image.open(io.BytesIO(data), formats=FORMATS) as image:
                width, height = image.size
    except Image.DecompressionBombError as exc:
        raise Problem(413, "image-too-large", str(exc)) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise Problem(415, "unsupported-image", f"the image is not {', '.join(FORMATS)} (by its header)") from None
    if width * height > max_pixels:
        raise Problem(
            413,
            "image-too-large",
            f"the image is {width}x{height} = {width * height} pixels; the model takes at most {max_pixels}",
        )
    return data
