"""Decode a request's image: raw bytes or their base64 text, JPEG/PNG/BMP/WebP, turned upright by EXIF.

Checks that cost nothing come first (the size in bytes, then the pixel count from the header) so
that an oversized upload or a decompression bomb is refused before a single pixel is decoded.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import warnings

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from kit.pipelines.errors import InputError

MAX_IMAGE_BYTES = 20 * 2**20
MAX_PIXELS = 40_000_000
FORMATS = ("JPEG", "PNG", "BMP", "WEBP")
URLSAFE = bytes.maketrans(b"-_", b"+/")
MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"BM", b"RIFF")
DATA_URL = re.compile(rb"^data:image/[\w.+-]+;base64,", re.IGNORECASE)  # a prefix, not anywhere in the text
NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/=_-]")


def image_bytes(data: bytes, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
    """The encoded image in `data`: the bytes themselves, or what their base64 text (or data URL) holds.

    Encoded images are binary, so a request that is all ASCII is taken as base64 text.
    """
    if not data:
        raise InputError("IMAGE is empty")
    if len(data) > max_bytes * 4 // 3 + 4096:  # room for base64's 4/3 and a data: URL
        raise InputError(f"IMAGE is {len(data)} bytes; the maximum is {max_bytes} bytes (of image, before base64)")
    raw = data if data.startswith(MAGIC) or not data.isascii() else decode_base64(data)
    if len(raw) > max_bytes:
        raise InputError(f"IMAGE is {len(raw)} bytes; the maximum is {max_bytes} bytes")
    return raw


def decode_base64(text: bytes) -> bytes:
    """Standard or URL-safe alphabet, padding optional, whitespace and a data: URL prefix allowed. Standard padded
    base64, what clients send, is decoded at once in C; the checks that name a fault scan every character, about ten
    times as long, so they run only on what that refuses."""
    try:
        raw = base64.b64decode(text, validate=True)
        if raw:
            return raw
    except (binascii.Error, ValueError):
        pass
    compact = re.sub(rb"\s+", b"", DATA_URL.sub(b"", text.strip(), count=1))
    bad = NOT_BASE64.search(compact)
    if bad:
        raise InputError(f"IMAGE is text but not base64: {bad.group().decode()!r} at character {bad.start()}")
    try:
        raw = base64.b64decode(compact.translate(URLSAFE) + b"=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InputError(f"IMAGE is not valid base64: {exc}") from None
    if not raw:
        raise InputError("IMAGE is base64 text of nothing")
    return raw


def decode_image(data: bytes, max_pixels: int = MAX_PIXELS, max_bytes: int = MAX_IMAGE_BYTES) -> np.ndarray:
    """A BGR uint8 [height, width, 3] picture, upright, transparency flattened onto white."""
    raw = image_bytes(data, max_bytes)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(raw), formats=FORMATS)
            width, height = image.size
            if width * height > max_pixels:
                raise InputError(f"IMAGE is {width}x{height} = {width * height} pixels; the maximum is {max_pixels}")
            image.load()
    except InputError:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise InputError("IMAGE is not a JPEG, PNG, BMP or WebP image (nor base64 text of one)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"IMAGE could not be decoded (truncated or corrupt?): {exc}") from None
    return to_bgr(ImageOps.exif_transpose(image))


def decode_request_image(tensor: np.ndarray, max_pixels: int = MAX_PIXELS, max_bytes: int = MAX_IMAGE_BYTES) -> np.ndarray:
    """The one picture of an entry model's IMAGE input (BYTES [1]), decoded as decode_image does."""
    items = tensor.reshape(-1)
    if items.size != 1:
        raise InputError(f"IMAGE must hold exactly one image, got {items.size}")
    return decode_image(bytes(items[0]), max_pixels, max_bytes)


def to_bgr(image: Image.Image) -> np.ndarray:
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba)
    rgb = np.asarray(image.convert("RGB"))
    return np.ascontiguousarray(rgb[:, :, ::-1])
