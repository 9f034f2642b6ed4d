"""The routes' request and response bodies (pydantic), which are also the OpenAPI document's schemas.

Request schemas are made per door from the served limits (door.contract), so the document states the
limits this door enforces. Field names are the models' tensor names in lower case (TEXT -> text, IMAGE
-> image); outputs keep their meaning under JSON names (CHUNK_SPANS + CHUNK_SCORES -> chunks).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    create_model,
    model_validator,
)
from pydantic import Strict as StrictValues
from tritonclient.utils import triton_to_np_dtype

# The OpenAPI format of an image's base64 text in a JSON body: a client or fuzzer that knows it makes
# real images (tests/served/test_door_schema.py); to any other it is base64 text.
IMAGE_FORMAT = "image-base64"
# What JSON Schema can say of the base64 text the door decodes, as a pattern (ECMA-262 and Python alike), measured
# against the decoders (tests/unit/test_door_schemas.py): an image's (door.images.from_base64, which takes what
# kit.pipelines.encoded_images.decode_base64 takes: a data: URL prefix, standard or URL-safe letters, whitespace
# anywhere, padding optional, and any padding after a whole quantum, as Python's decoder takes it) and raw float32
# data's (door.images.strict_base64: standard letters, padded exactly, no whitespace). That the bytes are an image, or
# as many as a shape needs, no pattern can say: the routes answer 415 and 400.
_SPACE = "[ \\t\\n\\r\\f\\v]*"
_LETTER = f"[A-Za-z0-9+/_-]{_SPACE}"
_PAD = f"={_SPACE}"
_DATA_URL = "[dD][aA][tT][aA]:[iI][mM][aA][gG][eE]/[A-Za-z0-9_.+-]+;[bB][aA][sS][eE]64,"
IMAGE_BASE64 = (
    f"^{_SPACE}(?:{_DATA_URL})?{_SPACE}(?:(?:{_LETTER}){{4}})*"
    f"(?:(?:{_LETTER}){{4}}(?:{_PAD})*|(?:{_LETTER}){{2}}(?:{_PAD}){{0,2}}|(?:{_LETTER}){{3}}(?:{_PAD})?)$"
)
PADDED_BASE64 = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


def utf8(text: str) -> str:
    """A JSON string may carry a lone surrogate (\\ud800), which has no UTF-8 form."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the text holds a lone surrogate: it is not valid Unicode") from None
    return text


Text = Annotated[str, AfterValidator(utf8)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def whitespace() -> str:
    """Every character Python's str.isspace() calls whitespace: a text model refuses a text made only of
    these (kit.pipelines.text), so the schema's pattern names them one by one, the same in every
    regex dialect (JSON Schema's ECMA-262 `\\s` is another set)."""
    return "".join(c for c in map(chr, range(0x3001)) if c.isspace())


NOT_BLANK = f"[^{whitespace()}]"


def not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the text is empty or only whitespace: there is nothing to classify")
    return text


def one_of_text_or_texts(schema: dict) -> None:
    """`text` or `texts`, exactly one; neither has a default to show (null is not one of their values)."""
    schema["oneOf"] = [{"required": ["text"]}, {"required": ["texts"]}]
    for field in schema["properties"].values():
        field.pop("default", None)


def text_type(max_text_bytes: int):
    """A text the model takes: not blank, valid Unicode, at most `max_text_bytes` of UTF-8 (the schema
    can count characters only: a character is at least one byte, the route counts the bytes)."""
    return Annotated[
        str,
        Field(
            min_length=1,
            # Stated, not enforced here: the route counts the bytes and answers 413 text-too-large.
            json_schema_extra={"pattern": NOT_BLANK, "maxLength": max_text_bytes},
            description=f"at most {max_text_bytes} bytes of UTF-8, not only whitespace",
        ),
        AfterValidator(utf8),
        AfterValidator(not_blank),
    ]


def text_request(max_text_bytes: int, max_texts: int) -> type[BaseModel]:
    Item = text_type(max_text_bytes)  # noqa: N806 (a type)

    class TextRequest(Strict):
        """One text (`text`) or several (`texts`), never both."""

        model_config = ConfigDict(json_schema_extra=one_of_text_or_texts)

        text: Item = Field(None, description="one text")
        texts: list[Item] = Field(None, min_length=1, max_length=max_texts, description=f"1 to {max_texts} texts")

        @model_validator(mode="after")
        def one_of(self):
            if (self.text is None) == (self.texts is None):
                raise ValueError("give either `text` or `texts`")
            return self

    return TextRequest


def ranking_request(max_text_bytes: int, max_texts: int) -> type[BaseModel]:
    Item = text_type(max_text_bytes)  # noqa: N806 (a type)

    class RankingRequest(Strict):
        """A query and the documents to score against it."""

        query: Item = Field(description="the query, read whole beside each chunk of each document")
        documents: list[Item] = Field(min_length=1, max_length=max_texts, description=f"1 to {max_texts} documents")

    return RankingRequest


def base64_cap(max_bytes: int) -> int:
    """Characters of base64 text the door reads for an image of at most `max_bytes` (room for a data:
    URL's prefix and line breaks)."""
    return max_bytes * 4 // 3 + 4096


def image_request(max_image_bytes: int, max_pixels: int) -> type[BaseModel]:
    class ImageRequest(Strict):
        image: str = Field(
            min_length=1,
            json_schema_extra={
                "maxLength": base64_cap(max_image_bytes),
                "pattern": IMAGE_BASE64,
                "format": IMAGE_FORMAT,
                "contentEncoding": "base64",
                "contentMediaType": "image/*",
            },
            description=f"an encoded image (JPEG, PNG, BMP or WebP) as base64 text (standard or URL-safe, padded "
            f"or not) or a data: URL; at most {max_image_bytes} bytes and {max_pixels} pixels",
        )

    return ImageRequest


def float32_base64_length(values: int) -> int:
    return 4 * math.ceil(4 * values / 3)


def pixels_shape(channels: int, max_pixels: int) -> object:
    """A pixels route's shape, [channels, height, width]: the served channel count, sides from 1 to `max_pixels` (the
    JSON body's `shape`, and a binary body's `?shape=` in the query)."""
    Side = Annotated[int, Field(ge=1, le=max_pixels)]  # noqa: N806 (a type)
    return tuple[Literal[channels], Side, Side]  # type: ignore[valid-type]


def pixels_query(channels: int, max_pixels: int) -> dict:
    """The OpenAPI parameter of a binary body's shape. Required with that body alone, which a parameter cannot say:
    the route answers 422 without it."""
    return {
        "name": "shape",
        "in": "query",
        "required": False,
        "schema": {"type": "string", "pattern": f"^{channels},[1-9][0-9]*,[1-9][0-9]*$"},
        "description": f"with an application/octet-stream body (and only then): its shape as `{channels},height,width`; "
        f"height x width at most {max_pixels}",
        "example": f"{channels},224,224",
    }


def pixels_request(channels: int, max_pixels: int) -> type[BaseModel]:
    class PixelsRequest(Strict):
        """A normalised image as raw float32: base64 of little-endian bytes in C order, not a JSON list of
        numbers, which would be about three times larger, slower to parse and not exact."""

        shape: pixels_shape(channels, max_pixels) = Field(  # type: ignore[valid-type]
            description=f"[{channels}, height, width]; height x width at most {max_pixels}"
        )
        data: str = Field(
            min_length=float32_base64_length(channels),
            json_schema_extra={
                "maxLength": float32_base64_length(channels * max_pixels),
                "pattern": PADDED_BASE64,
                "contentEncoding": "base64",
            },
            description="base64 of the float32 little-endian values, C order (channel, row, column): exactly "
            f"4 x {channels} x height x width bytes (a 400 otherwise)",
        )

    return PixelsRequest


def element_type(wire: str, answer: bool = False) -> object:
    """The JSON value of one element of a tensor of protocol type `wire` (FP32, INT64, BOOL, BYTES), within the
    type's range; strict, so that `false` is no 0 and "1" no 1. An answer's float may be null: JSON has no NaN."""
    if wire == "BOOL":
        return StrictBool
    if wire == "BYTES":
        return StrictStr
    if wire.startswith(("FP", "BF")):
        if answer:
            return float | None
        top = float(np.finfo(triton_to_np_dtype(wire)).max) if wire != "BF16" else float(np.finfo(np.float32).max)
        return Annotated[float, StrictValues(), Field(ge=-top, le=top)]
    limits = np.iinfo(triton_to_np_dtype(wire))
    return Annotated[int, BeforeValidator(json_number), Field(ge=int(limits.min), le=int(limits.max))]


def json_number(value: object) -> object:
    """A JSON number, as JSON Schema's `integer` takes it (2.0 is one); not a string or a boolean, which
    pydantic's lax integers would take."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("not a JSON number")
    return value


def nested(wire: str, dims: tuple[int, ...], max_rows: int | None, answer: bool = False) -> object:
    """Nested lists, one level per axis, each as long as its axis: the rows (1 to `max_rows`, where batched),
    then each fixed dim exactly and each dynamic one at least 1 in a request; in an answer a dynamic axis may be
    empty (an unbatched pipeline's answer has its own size: no peaks, no lines). That the lists of a dynamic axis are
    alike in length, and the rows alike in every input, a JSON Schema cannot say: the route checks them."""
    kind: object = element_type(wire, answer)
    free = Field(min_length=0 if answer else 1)
    for dim in reversed(dims):
        kind = Annotated[list[kind], Field(min_length=dim, max_length=dim) if dim > 0 else free]
    if max_rows is not None:
        kind = Annotated[list[kind], Field(min_length=1, max_length=max_rows)]
    return kind


def shape_words(dims: tuple[int, ...], batched: bool) -> str:
    return "[" + ", ".join(["rows"] * batched + [str(d) if d > 0 else "any" for d in dims]) + "]"


def tensors_model(
    title: str, tensors: dict[str, tuple[str, tuple[int, ...]]], max_rows: int | None, answer: bool = False
) -> type[BaseModel]:
    """One field per tensor, named as the model names it (an alias: a tensor's name need not be a Python name)."""
    batched = max_rows is not None
    fields = {
        f"tensor_{i}": (
            nested(wire, dims, max_rows, answer),
            Field(alias=name, description=f"{wire}, shape {shape_words(dims, batched)}"),
        )
        for i, (name, (wire, dims)) in enumerate(tensors.items())
    }
    return create_model(title, __base__=Strict, **fields)


def tensor_request(model: str, inputs: dict, batched: bool, max_rows: int) -> type[BaseModel]:
    """`inputs`: name -> (protocol type, dims without the batch axis)."""
    rows = f"; 1 to {max_rows} rows, the same in every input" if batched else ""
    Inputs = tensors_model(f"{title_case(model)}Inputs", inputs, max_rows if batched else None)  # noqa: N806 (a type)
    return create_model(
        f"{title_case(model)}Request",
        __base__=Strict,
        inputs=(Inputs, Field(description=f"every input of {model}, as nested JSON arrays{rows}")),
    )


def tensor_result(model: str, outputs: dict, batched: bool, max_rows: int) -> type[BaseModel]:
    Outputs = tensors_model(f"{title_case(model)}Outputs", outputs, max_rows if batched else None, answer=True)  # noqa: N806
    return create_model(
        f"{title_case(model)}Result",
        outputs=(Outputs, Field(description=f"every output of {model}" + (", a row for each input row" if batched else ""))),
    )


def title_case(model: str) -> str:
    return "".join(part.capitalize() for part in model.split("_"))


class Chunk(BaseModel):
    start: int = Field(description="first character of the chunk (Unicode code points, from 0)")
    end: int = Field(description="one past the chunk's last character")
    score: float = Field(description="the chunk's probability")


def score_result(model: str) -> type[BaseModel]:
    """A text scorer's answer: the text's probability and each chunk's."""
    return create_model(
        f"{title_case(model)}Result",
        score=(float, Field(description="the text's probability: its chunks', weighted by length")),
        chunks=(list[Chunk], ...),
    )


def ranking_result(model: str) -> type[BaseModel]:
    """A cross-encoder's answer: each document's relevance (its chunks' best, or mean) and each chunk's, in order."""
    Ranked = create_model(  # noqa: N806 (a type)
        f"{title_case(model)}Document",
        index=(int, Field(description="the document's place in `documents`")),
        score=(float, Field(description="the document's relevance to the query, 0 to 1")),
        chunks=(list[Chunk], Field(description="the document's chunks, each scored beside the query; offsets into it")),
    )
    return create_model(f"{title_case(model)}Result", documents=(list[Ranked], Field(description="in the order sent")))


def labelled_result(model: str, labels: tuple[str, ...]) -> type[BaseModel]:
    """A text classifier's answer (a text-classification spec's model): its most probable label, every label's
    probability, and each chunk's, by the checkpoint's label names."""
    Label = Literal[labels]  # noqa: N806 (a type)
    Scores = Annotated[dict[Label, float], Field(description=f"each label's probability: {', '.join(labels)}")]  # noqa: N806
    LabelledChunk = create_model(  # noqa: N806
        f"{title_case(model)}Chunk",
        start=(int, Field(description="first character of the chunk (Unicode code points, from 0)")),
        end=(int, Field(description="one past the chunk's last character")),
        scores=(Scores, ...),
    )
    return create_model(
        f"{title_case(model)}Result",
        label=(Label, Field(description="the most probable label of the whole text")),
        scores=(Scores, Field(description="each label's probability over the whole text, chunks weighted by length")),
        chunks=(list[LabelledChunk], ...),
    )


def entities_result(model: str, labels: tuple[str, ...]) -> type[BaseModel]:
    """A token classifier's answer (a token-classification spec's model): the text's entities in order, each by its
    type, and the windows the text was read in."""
    Label = Literal[labels] if labels else str  # noqa: N806 (a type)
    Entity = create_model(  # noqa: N806 (a type)
        f"{title_case(model)}Entity",
        label=(Label, Field(description="the entity's type: its tokens' label without the B-/I- prefix")),
        score=(float, Field(description="its tokens' mean probability of their labels")),
        start=(int, Field(description="first character of the entity (Unicode code points, from 0)")),
        end=(int, Field(description="one past the entity's last character")),
        word=(str, Field(description="its tokens as the tokenizer decodes them")),
    )
    Window = create_model(  # noqa: N806 (a type)
        f"{title_case(model)}Window",
        start=(int, Field(description="first character of the window's tokens")),
        end=(int, Field(description="one past the window's last character")),
    )
    return create_model(
        f"{title_case(model)}Result",
        entities=(list[Entity], Field(description="in the order of the text; of two that overlapping windows found, one")),
        chunks=(list[Window], Field(description="the windows of the model's token limit the text was read in, overlapping")),
    )


def image_labelled_result(model: str, labels: tuple[str, ...]) -> type[BaseModel]:
    """An image classifier's answer (an image-classification spec's model): its most probable label and every label's
    probability, by the checkpoint's label names."""
    Label = Literal[labels]  # noqa: N806 (a type)
    return create_model(
        f"{title_case(model)}Result",
        label=(Label, Field(description="the most probable label of the image")),
        scores=(dict[Label, float], Field(description=f"each label's probability: {', '.join(labels)}")),
    )


def embedding_result(model: str, dimensions: int) -> type[BaseModel]:
    """A text encoder's answer (a feature-extraction spec's model): the text's embedding and each chunk's."""
    Vector = Annotated[list[float], Field(min_length=dimensions, max_length=dimensions)]  # noqa: N806 (a type)
    EmbeddedChunk = create_model(  # noqa: N806
        f"{title_case(model)}Chunk",
        start=(int, Field(description="first character of the chunk (Unicode code points, from 0)")),
        end=(int, Field(description="one past the chunk's last character")),
        embedding=(Vector, Field(description="the chunk's own embedding")),
    )
    return create_model(
        f"{title_case(model)}Result",
        embedding=(Vector, Field(description=f"the text's {dimensions}-dimensional embedding: its chunks', weighted by length")),
        chunks=(list[EmbeddedChunk], ...),
    )


def lines_result(model: str) -> type[BaseModel]:
    """A text reader's answer: the lines it found in an image."""
    Line = create_model(  # noqa: N806 (a type)
        f"{title_case(model)}Line",
        text=(str, ...),
        score=(float, ...),
        box=(list[list[float]], Field(description="4 corners [x, y] in image pixels, clockwise from top-left")),
    )
    return create_model(f"{title_case(model)}Result", lines=(list[Line], Field(description="the text lines in reading order")))


class ClassScore(BaseModel):
    index: int
    prob: float


def classes_result(model: str, labels: tuple[str, ...] = ()) -> type[BaseModel]:
    """A pixel classifier's answer: every class's probability and the five most probable, each with its label name
    where the checkpoint names its classes."""
    score = ClassScore
    if labels:
        name = Field(description=f"the class's label: {', '.join(labels)}")
        score = create_model(f"{title_case(model)}ClassScore", __base__=ClassScore, label=(Literal[labels], name))
    return create_model(
        f"{title_case(model)}Result",
        probs=(list[float], Field(description="the probability of each class")),
        top=(list[score], Field(description="the five most probable classes, most probable first")),
    )


class ProblemPlace(BaseModel):
    loc: list[str] = Field(description="where in the body, as a path of keys and indices")
    msg: str


class ProblemBody(BaseModel):
    """RFC 9457 problem details (application/problem+json)."""

    type: str = Field(description="urn:triton-kit:problem:<kind> (docs/DOOR.md lists the kinds), or about:blank")
    title: str
    status: int
    detail: str
    request_id: str | None = Field(None, description="the request's X-Request-ID")
    errors: list[ProblemPlace] | None = Field(None, description="each schema error's place (invalid-request only)")
