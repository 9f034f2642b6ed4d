"""Generated images with known content: documents of printed lines and health-code screenshots.

No image data set can be downloaded here, so the tests, the export's validation and the benchmarks
draw their own, deterministically from a seed, with a CJK font that `make system-deps` installs.
A missing font is an error, never a skip: without it the images would hold boxes instead of text.
"""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import qrcode
from PIL import Image, ImageDraw, ImageFont

FONT_PATHS = (
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
)
FONT_PACKAGE = "fonts-wqy-microhei"

PHRASES = [
    "人工智能正在改变我们的生活方式",
    "请在入口处出示健康码",
    "会议将于下午三点在二楼举行",
    "本店营业时间为早上九点至晚上十点",
    "北京市海淀区中关村大街27号",
    "订单编号 20240315008812",
    "联系电话 010-62751234",
    "合计金额 356.80 元",
    "欢迎光临 Welcome",
    "Triton Inference Server",
    "Dynamic batching on CPU",
    "Invoice No. 2024-0417",
    "Total due: 1,280.00 USD",
    "今天天气晴朗，适合出门散步",
    "图书馆周一闭馆",
    "请保持安静",
    "上海市浦东新区世纪大道100号",
    "快递已送达，请及时取件",
    "第三季度销售额增长百分之十二",
    "深度学习模型部署",
    "Batch size 8, queue delay 2 ms",
    "温度 23.5 ℃ 湿度 45%",
    "食品安全 人人有责",
    "OCR accuracy report",
]

SURNAMES = "张王李赵刘陈杨黄周吴徐孙马朱胡郭何林罗高"
GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚"

# Health-code colours as the apps draw them, a few shades each (RGB).
COLORS = {
    "green": [(0, 168, 84), (28, 180, 90), (0, 150, 60)],
    "yellow": [(255, 193, 7), (250, 200, 30), (245, 180, 0)],
    "red": [(230, 0, 18), (220, 40, 40), (200, 16, 46)],
}
STATUS = {
    "green": "绿码：未见异常",
    "yellow": "黄码：请配合核酸检测",
    "red": "红码：请立即居家隔离",
}


class FontMissing(RuntimeError):
    """The CJK font the generated images need is not installed."""


@cache
def font(size: int) -> ImageFont.FreeTypeFont:
    for path in FONT_PATHS:
        if path.is_file():
            return ImageFont.truetype(str(path), size)
    raise FontMissing(f"no CJK font at {', '.join(map(str, FONT_PATHS))}: install {FONT_PACKAGE} (make system-deps)")


def encode(image: Image.Image, fmt: str = "PNG", **kwargs) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **kwargs)
    return buffer.getvalue()


@dataclass
class Document:
    """An encoded image and the text lines printed on it, top to bottom."""

    data: bytes
    lines: list[str]


def text_line(text: str, height: int = 48, pad: int = 6) -> Image.Image:
    """One printed line cropped tight, as a detector's crop would be: used to check recognition."""
    face = font(height - 2 * pad)
    left, top, right, bottom = face.getbbox(text)
    image = Image.new("RGB", (right - left + 2 * pad, height), "white")
    ImageDraw.Draw(image).text((pad - left, (height - (bottom - top)) // 2 - top), text, fill="black", font=face)
    return image


def document(seed: int, width: int | None = None, lines: int | None = None, fmt: str = "PNG") -> Document:
    """Printed lines on a white page, one per row, font sizes 22-40 px, with generous spacing."""
    rng = random.Random(seed)
    width = width or rng.choice([640, 800, 960, 1200])
    count = lines or rng.randint(3, 8)
    rows, y = [], 30
    for _ in range(count):
        size = rng.randint(22, 40)
        face = font(size)
        text = rng.choice([p for p in PHRASES if face.getlength(p) < width - 80])
        rows.append((text, size, rng.randint(30, max(30, width - 40 - int(face.getlength(text)))), y))
        y += int(size * rng.uniform(1.9, 2.6))
    image = Image.new("RGB", (width, y + 30), "white")
    draw = ImageDraw.Draw(image)
    for text, size, x, top in rows:
        draw.text((x, top), text, fill=(20, 20, 20), font=font(size))
    return Document(encode(image, fmt, **({"quality": 92} if fmt == "JPEG" else {})), [r[0] for r in rows])


def masked_name(rng: random.Random) -> str:
    """Names as health codes print them: the middle (or last) character hidden."""
    surname, given = rng.choice(SURNAMES), "".join(rng.choice(GIVEN) for _ in range(rng.choice([1, 2])))
    return f"{surname}*{given[-1]}" if len(given) == 2 else f"{surname}*"


@dataclass
class HealthCode:
    data: bytes
    color: str
    name: str | None
    datetime: str | None
    status: str | None
    qr: str | None


def qr_image(payload: str, rgb: tuple[int, int, int], box_size: int = 8) -> Image.Image:
    code = qrcode.QRCode(error_correction=qrcode.constants.ERROR_CORRECT_M, box_size=box_size, border=2)
    code.add_data(payload)
    code.make(fit=True)
    return code.make_image(fill_color=rgb, back_color="white").convert("RGB")


def health_code(seed: int, color: str | None, width: int | None = None, fmt: str = "PNG") -> HealthCode:
    """A phone screenshot of a health code; `color=None` draws the page with no QR code at all."""
    rng = random.Random(seed)
    width = width or rng.choice([540, 600, 720])
    height = int(width * rng.choice([16 / 9, 2.0]))
    image = Image.new("RGB", (width, height), (245, 246, 248))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, width, int(width * 0.16)), fill=(40, 110, 220))
    title = font(int(width * 0.06))
    draw.text((width * 0.06, width * 0.045), "健康码", fill="white", font=title)

    name = masked_name(rng)
    day = f"2022-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    when = f"{day} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    body = font(int(width * 0.05))
    y = int(width * 0.22)
    draw.text((width * 0.08, y), f"姓名：{name}", fill=(30, 30, 30), font=body)
    y += int(width * 0.09)
    draw.text((width * 0.08, y), when, fill=(30, 30, 30), font=body)
    y += int(width * 0.11)

    payload = status = None
    if color is not None:
        rgb = rng.choice(COLORS[color])
        payload = f"HC:{seed:06d}:{color}"
        qr = qr_image(payload, rgb)
        side = int(width * 0.6)
        image.paste(qr.resize((side, side), Image.NEAREST), ((width - side) // 2, y))
        y += side + int(width * 0.06)
        status = STATUS[color]
        draw.text((width * 0.08, y), status, fill=rgb, font=body)
    else:
        draw.text((width * 0.08, y), "暂无健康码信息", fill=(90, 90, 90), font=body)
    small = font(int(width * 0.035))
    draw.text((width * 0.08, height - width * 0.12), "本码仅用于疫情防控", fill=(120, 120, 120), font=small)
    data = encode(image, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return HealthCode(data, color or "unknown", name, when, status, payload)


def mixed_images(count: int, seed: int, document_widths: Sequence[int] = (640, 800, 960, 1200)) -> list[bytes]:
    """The benchmarks' sample: `count` PNG images, documents and health-code screenshots alternating, of several widths."""
    rng = random.Random(seed)
    return [
        health_code(seed + i, rng.choice(["green", "yellow", "red"]), width=rng.choice([540, 720, 1080])).data
        if i % 2
        else document(seed + i, width=rng.choice(document_widths)).data
        for i in range(count)
    ]
