"""Health codes: colour from the QR code's pixels, its payload, and the printed fields."""

import io
import json

import jsonschema
import numpy as np
import pytest
from PIL import Image

from kit.control.configs import parameters
from kit.control.specs import DOOR_SCHEMA
from ocr.health_code import code_color, find_datetime, find_name, find_qr, find_status, read_health_code
from samples.images import COLORS, qr_image
from tests.profiles import canonical


def on_page(qr: Image.Image, jpeg: bool = False) -> np.ndarray:
    page = Image.new("RGB", (qr.width + 120, qr.height + 200), (245, 246, 248))
    page.paste(qr, (60, 100))
    if jpeg:
        buffer = io.BytesIO()
        page.save(buffer, "JPEG", quality=80)
        page = Image.open(buffer).convert("RGB")
    return np.ascontiguousarray(np.asarray(page)[:, :, ::-1])


@pytest.mark.parametrize("color, rgb", [(c, rgb) for c, shades in COLORS.items() for rgb in shades])
@pytest.mark.parametrize("jpeg", [False, True])
def test_every_shade_of_each_colour_is_classified_and_decoded(color, rgb, jpeg):
    image = on_page(qr_image(f"payload-{color}", rgb), jpeg)
    qr = find_qr(image)
    assert qr is not None and qr.payload == f"payload-{color}"
    assert code_color(image, qr.corners) == color


def test_a_black_code_has_no_health_colour():
    image = on_page(qr_image("plain", (0, 0, 0)))
    assert code_color(image, find_qr(image).corners) == "unknown"


def test_a_page_without_a_code_is_unknown_with_null_payload():
    image = np.full((400, 300, 3), 250, np.uint8)
    result = read_health_code(image, find_qr(image), ["健康码"])
    assert (result["color"], result["qr"]) == ("unknown", None)


@pytest.mark.parametrize(
    "texts, name",
    [
        (["健康码", "姓名：张*三"], "张*三"),
        (["姓名: 欧阳*明"], "欧阳*明"),
        (["健康码", "李＊"], "李*"),
        (["王*"], "王*"),
        (["健康码", "2022-05-01", "a*b"], None),
    ],
)
def test_the_name_is_read_as_printed(texts, name):
    assert find_name(texts) == name


@pytest.mark.parametrize(
    "texts, stamp",
    [
        (["2022-05-01 14:23:45"], "2022-05-01 14:23:45"),
        (["2022-08-1620:24:50"], "2022-08-16 20:24:50"),  # OCR drops the space
        (["2022年5月1日 9:05"], "2022-05-01 09:05"),
        (["2022/05/01", "14:23:45"], "2022-05-01 14:23:45"),  # date and time read as two lines
        (["健康码", "本码仅用于疫情防控"], None),
    ],
)
def test_the_date_and_time_are_found_and_normalised(texts, stamp):
    assert find_datetime(texts) == stamp


def test_the_status_line_is_the_first_that_names_a_code_state():
    assert find_status(["健康码", "姓名：张*三", "黄码：请配合核酸检测", "红码"]) == "黄码：请配合核酸检测"
    assert find_status(["健康码", "暂无健康码信息"]) is None


@pytest.mark.parametrize("rgb", [COLORS["green"][0], (0, 0, 0), None])
def test_the_document_fits_the_json_schema_its_config_gives_the_door(rgb):
    """The door's OpenAPI document states the committed `door_schema`, so every document the reader writes fits it."""
    schema = json.loads(parameters(canonical()["health_code"].config)[DOOR_SCHEMA])
    image = on_page(qr_image("payload", rgb)) if rgb else np.full((400, 300, 3), 250, np.uint8)
    texts = ["健康码", "姓名：张*三", "2022-05-01 10:00:00", "未见异常"]
    jsonschema.validate(read_health_code(image, find_qr(image), texts), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**read_health_code(image, find_qr(image), texts), "colour": "green"}, schema)
