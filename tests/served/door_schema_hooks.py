"""What the schema fuzzer needs beyond the door's OpenAPI document (loaded by schemathesis through
$SCHEMATHESIS_HOOKS, tests/served/test_door_schema.py).

Two things a JSON Schema cannot state, given to the generator as the document names them:
- the image routes' bodies are images: strings of the format `image-base64` (JSON) and `binary`
  (form uploads) are drawn as real PNG, JPEG, BMP and WebP images of random sizes and colours;
- a ResNet body's `data` holds 4 x channels x height x width bytes, and height x width is within the
  served limit: a body generated as valid gets a shape cut to $DOOR_FUZZ_PIXELS (at most the served
  limit, smaller to bound the run's time on a CPU) and data of its length. A body generated as
  invalid is left as it was drawn.
"""

from __future__ import annotations

import base64
import io
import os

import schemathesis
from hypothesis import strategies as st
from PIL import Image

from door.schemas import IMAGE_FORMAT

FORMATS = ("PNG", "JPEG", "BMP", "WEBP")


@st.composite
def images(draw) -> bytes:
    size = (draw(st.integers(1, 96)), draw(st.integers(1, 96)))
    colour = tuple(draw(st.integers(0, 255)) for _ in range(3))
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, draw(st.sampled_from(FORMATS)))
    return buffer.getvalue()


schemathesis.openapi.format(IMAGE_FORMAT, images().map(lambda data: base64.b64encode(data).decode("ascii")))
schemathesis.openapi.format("binary", images())


@schemathesis.hook
def map_case(context, case):
    body = case.body
    valid = case.meta is not None and not case.meta.generation.mode.is_negative
    if valid and case.path == "/v1/resnet50" and isinstance(body, dict) and "shape" in body:
        channels, height, width = (int(side) for side in body["shape"])
        budget = int(os.environ["DOOR_FUZZ_PIXELS"])
        height = min(height, budget)
        width = min(width, budget // height)
        body["shape"] = [channels, height, width]
        body["data"] = base64.b64encode(bytes(4 * channels * height * width)).decode("ascii")
    return case
