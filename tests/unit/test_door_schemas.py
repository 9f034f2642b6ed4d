"""The base64 patterns the door's OpenAPI document states (door.schemas) hold exactly the texts its decoders take:
every short text of the characters that matter, matched by the pattern if and only if the decoder takes it, so that
a schema fuzzer's valid text decodes and its invalid text is refused."""

from __future__ import annotations

import binascii
import itertools
import re

import pytest

from door.images import from_base64, strict_base64
from door.problems import Problem
from door.schemas import IMAGE_BASE64, PADDED_BASE64
from kit.pipelines.encoded_images import decode_base64


def image_decoder_takes(text: str) -> bool:
    try:
        raw = from_base64(text, 1 << 20)
    except Problem:
        return False
    assert raw == decode_base64(text.encode("ascii", "replace")), text  # the door's fast path decodes as the kit does
    return True


def data_decoder_takes(text: str) -> bool:
    try:
        strict_base64(text)
    except (binascii.Error, ValueError):
        return False
    return True


def texts(characters: str, longest: int) -> list[str]:
    return ["".join(chars) for n in range(longest + 1) for chars in itertools.product(characters, repeat=n)]


PREFIXED = [
    "data:image/png;base64,AAAA",
    "DATA:Image/PNG;BASE64,\nAA==",
    " data:image/webp;base64, AA_-",
    "AAAAdata:image/png;base64,AAAA",
    "data:text/plain;base64,AAAA",
    "data:image/png;base64,",
    "AA\u00a0AA",
]


@pytest.mark.parametrize(
    "pattern, takes, cases",
    [
        (IMAGE_BASE64, image_decoder_takes, texts("A_= \n", 6) + texts("A+/=", 8) + PREFIXED),
        (PADDED_BASE64, data_decoder_takes, texts("A/=", 9) + texts("A_ =", 6)),
    ],
    ids=["image", "float32-data"],
)
def test_a_base64_pattern_matches_exactly_what_its_decoder_takes(pattern, takes, cases):
    compiled = re.compile(pattern)
    wrong = [text for text in cases if bool(compiled.fullmatch(text)) != takes(text)]
    assert not wrong, f"{len(wrong)} of {len(cases)} disagree, e.g. {wrong[:5]}"
