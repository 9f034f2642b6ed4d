"""The routes' request and response bodies (pydantic), which are also the OpenAPI document's schemas.

Request schemas are made per door from the served limits (door.contract), so the document states the
limits this door enforces. Field names are the models' tensor names in lower case (TEXT -> text, IMAGE
-> image); outputs keep their meaning under JSON names (CHUNK_SPANS + CHUNK_SCORES -> chunks).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator


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


def radar_request(max_text_bytes: int, max_texts: int) -> type[BaseModel]:
    class RadarRequest(Strict):
        """One text (`text`) or several (`texts`), never both."""

        text: Text | None = Field(None, description=f"one text, at most {max_text_bytes} bytes of UTF-8")
        texts: list[Text] | None = Field(
            None,
            min_length=1,
            max_length=max_texts,
            description=f"1 to {max_texts} texts, each at most {max_text_bytes} bytes of UTF-8",
        )

        @model_validator(mode="after")
        def one_of(self):
            if (self.text is None) == (self.texts is None):
                raise ValueError("give either `text` or `texts`")
            return self

    return RadarRequest


def image_request(max_image_bytes: int, max_pixels: int) -> type[BaseModel]:
    class ImageRequest(Strict):
        image: str = Field(
            description=f"the encoded image (JPEG, PNG, BMP or WebP) as base64 text, or a data: URL; "
            f"at most {max_image_bytes} bytes and {max_pixels} pixels"
        )

    return ImageRequest


def resnet_request(channels: int, max_pixels: int) -> type[BaseModel]:
    class ResnetRequest(Strict):
        """A normalised image as raw float32: base64 of little-endian bytes in C order, not a JSON list of
        numbers, which would be about three times larger, slower to parse and not exact."""

        shape: list[Annotated[int, Field(ge=1)]] = Field(
            min_length=3, max_length=3, description=f"[{channels}, height, width]; height x width at most {max_pixels}"
        )
        data: str = Field(description="base64 of the float32 little-endian values, C order (channel, row, column)")

    return ResnetRequest


class Chunk(BaseModel):
    start: int = Field(description="first character of the chunk (Unicode code points, from 0)")
    end: int = Field(description="one past the chunk's last character")
    score: float = Field(description="the chunk's AI-generated probability")


class RadarResult(BaseModel):
    score: float = Field(description="the text's AI-generated probability")
    chunks: list[Chunk]


class OcrLine(BaseModel):
    text: str
    score: float
    box: list[list[float]] = Field(description="4 corners [x, y] in image pixels, clockwise from top-left")


class OcrResult(BaseModel):
    lines: list[OcrLine] = Field(description="the text lines in reading order")


class HealthCodeFields(BaseModel):
    name: str | None
    datetime: str | None
    status: str | None


class HealthCodeResult(BaseModel):
    color: str = Field(description="green, yellow, red or unknown")
    qr: str | None = Field(description="the QR code's payload; null when there is none")
    texts: list[str]
    fields: HealthCodeFields


class ClassScore(BaseModel):
    index: int
    prob: float


class ResnetResult(BaseModel):
    probs: list[float] = Field(description="the probability of each class")
    top: list[ClassScore] = Field(description="the five most probable classes, most probable first")


class ProblemBody(BaseModel):
    """RFC 9457 problem details (application/problem+json)."""

    type: str
    title: str
    status: int
    detail: str
    request_id: str | None = None
