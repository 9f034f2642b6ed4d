"""What the schema fuzzer needs beyond the door's OpenAPI document (loaded by schemathesis through
$SCHEMATHESIS_HOOKS, tests/served/test_door_schema.py).

Two things a JSON Schema cannot state, given to the generator as the document names them:
- the image routes' bodies are images: strings of the format `image-base64` (JSON) and `binary`
  (form uploads) are drawn as real PNG, JPEG, BMP and WebP images of random sizes and colours;
- a pixels route's body (resnet50's, any image classifier of pixels') has `data` of 4 x channels x
  height x width bytes, and height x width is within the served limit: a body generated as valid gets
  a shape cut to $DOOR_FUZZ_PIXELS (at most the served limit, smaller to bound the run's time on a
  CPU) and data of its length; a valid binary body (application/octet-stream) gets a `?shape=` so cut
  (one where none was drawn) and bytes of its length. A body generated as invalid is left as it was drawn;
- a tensor route's valid body is a tensor, and within what the tests' own models take (tensor_bodies).
"""

from __future__ import annotations

import base64
import io
import math
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
    if valid and isinstance(body, dict) and {"shape", "data"} <= set(body):  # a pixels route's (resnet50's, shapes')
        body["shape"] = within_budget(*(int(side) for side in body["shape"]))
        body["data"] = base64.b64encode(bytes(4 * math.prod(body["shape"]))).decode("ascii")
    elif valid and case.media_type == "application/octet-stream":  # a pixels route's float32 bytes
        shape = pixels_shape(case)
        case.query = {**(case.query or {}), "shape": ",".join(map(str, shape))}
        case.body = bytes(4 * math.prod(shape))
    return case


def within_budget(channels: int, height: int, width: int) -> list[int]:
    budget = int(os.environ["DOOR_FUZZ_PIXELS"])
    height = min(height, budget)
    return [channels, height, min(width, budget // height)]


def pixels_shape(case) -> list[int]:
    """The drawn `?shape=` of a binary pixels body, within the budget; where none was drawn (the parameter is optional,
    as a JSON body needs none: the route refuses a binary body without it), the parameter's example's channels, 1 x 1."""
    drawn = (case.query or {}).get("shape")
    if drawn:
        return within_budget(*(int(side) for side in str(drawn).split(",")))
    (parameter,) = (p for p in case.operation.definition.raw["parameters"] if p["name"] == "shape")
    return [int(parameter["example"].split(",")[0]), 1, 1]


def rectangular(value, shape: list[int]):
    """`value` (nested lists as drawn) cut or filled to `shape`, keeping the drawn numbers where there are some."""
    items = value if isinstance(value, list) else [value]
    if not shape:
        return items[0] if items and not isinstance(items[0], list) else 0
    filled = (items * shape[0])[: shape[0]] if items else [0] * shape[0]
    return [rectangular(item, shape[1:]) for item in filled]


def depth(value) -> list[int]:
    """The lengths along the first element of each level."""
    lengths = []
    while isinstance(value, list) and value:
        lengths.append(len(value))
        value = value[0]
    return lengths


def fixed_lengths(schema: dict) -> list[int | None]:
    """Each axis's length where the input's schema fixes it (minItems = maxItems), else None: the rows and free axes."""
    lengths = []
    while isinstance(schema, dict) and schema.get("type") == "array":
        low, high = schema.get("minItems"), schema.get("maxItems")
        lengths.append(low if low is not None and low == high and lengths else None)
        schema = schema.get("items", {})
    return lengths


def input_schemas(case) -> dict[str, dict]:
    body = case.operation.definition.raw.get("requestBody", {}).get("content", {}).get("application/json", {})
    return body.get("schema", {}).get("properties", {}).get("inputs", {}).get("properties", {})


@schemathesis.hook("map_case")
def tensor_bodies(context, case):
    """A tensor route's valid body (door.routes: a model from a spec) as a tensor: each input's lists alike along
    each axis, its fixed axes as the schema fixes them, and the rows and free axes alike across inputs (the first
    drawn length on each), which no JSON Schema says. Then what the tests' own models take beyond their types: their
    graphs (tests/served/conftest.py BROUGHT) read integer inputs as indices into 10 rows, so whole numbers are drawn
    again within 0-9 (a float input takes them as well); their pipelines (tests/pipelines) refuse a scale that is not
    positive and a text without a word."""
    body = case.body
    valid = case.meta is not None and not case.meta.generation.mode.is_negative
    if valid and isinstance(body, dict) and isinstance(body.get("inputs"), dict) and body["inputs"]:
        inputs, schemas = body["inputs"], input_schemas(case)
        shared: dict[int, int] = {}  # axis -> the first drawn length of a free axis there
        for name, value in inputs.items():
            own, fixed = depth(value), fixed_lengths(schemas.get(name, {}))
            wanted = []
            for axis, length in enumerate(own):
                if axis < len(fixed) and fixed[axis] is not None:
                    wanted.append(fixed[axis])
                else:
                    wanted.append(shared.setdefault(axis, length))
            inputs[name] = within_tests_models(name, indices(rectangular(value, wanted)))
    return case


def indices(value):
    if isinstance(value, list):
        return [indices(item) for item in value]
    whole = isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and value.is_integer()
    return int(value) % 10 if whole else value


def within_tests_models(name: str, value):
    if isinstance(value, list):
        return [within_tests_models(name, item) for item in value]
    if name == "scale" and isinstance(value, int | float) and not isinstance(value, bool):
        return abs(value) + 1
    if name == "text" and isinstance(value, str):
        return "word " + value
    return value
