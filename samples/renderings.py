"""Pages laid out in HTML/CSS and rendered by a real browser, with the text they show known.

Images drawn with PIL (samples.images) are kind to an OCR engine: large glyphs, generous line
spacing, no anti-aliasing quirks. What users send are screenshots and web pages: wide and short,
small crisp text, dark modes, phone screens at device pixel ratio 3, re-encoded as JPEG by
messaging apps. These pages are rendered by Debian's headless `chromium` (driven by playwright, no
browser download) with Debian's fonts, so they are deterministic for a seed. Every line of text is
an element of class `l`; the known text is what the browser says those elements show.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import random
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from PIL import Image

from samples.images import PHRASES, STATUS, masked_name, qr_image
from samples.texts import MULTILINGUAL, english_prose

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--font-render-hinting=none",
]
LATIN = "'DejaVu Sans'"
CJK = "'WenQuanYi Micro Hei'"
# Health-code colours as apps draw them on a phone (RGB), one shade each: the reader must get all.
CODE_COLORS = {"green": (0, 168, 84), "yellow": (245, 180, 0), "red": (220, 40, 40)}


@dataclass(frozen=True)
class Layout:
    """One page to render: its HTML body, a style sheet and the browser window it is shown in."""

    name: str
    kind: str
    body: str
    style: str
    width: int  # CSS pixels
    scale: int = 1  # device pixel ratio: a phone screenshot at 3 is 3x its CSS width
    jpeg_quality: int | None = None  # re-encoded as a messaging app would
    code: dict | None = None  # health-code screens: color, qr, name, datetime, status


@dataclass
class Rendering:
    name: str
    kind: str
    data: bytes  # PNG, or JPEG when the layout says so
    lines: list[str]  # the text of every `.l` element, top to bottom
    size: tuple[int, int]  # (width, height) in pixels
    code: dict | None = field(default=None)


class BrowserMissing(RuntimeError):
    """Debian's chromium is not installed (make system-deps installs it)."""


PLAIN_WORD = re.compile(r"[A-Za-z0-9,.;:'()?!-]+")  # prose words, not the docs' markup and ASCII tables


def plain_words(prose: str) -> list[str]:
    return [w for w in prose.split() if PLAIN_WORD.fullmatch(w)]


def words(rng: random.Random, vocabulary: Sequence[str], chars: int) -> str:
    """About `chars` characters of English prose (consecutive plain words of the docs)."""
    i = rng.randrange(len(vocabulary) - chars)
    text = vocabulary[i]
    while len(text) + len(vocabulary[i + 1]) < chars:
        i += 1
        text += " " + vocabulary[i]
    return text


def chinese(rng: random.Random, chars: int) -> str:
    """About `chars` characters of Chinese, from the samples' phrases and sentence."""
    pool = [p for p in PHRASES if re.search(r"[\u4e00-\u9fff]", p)] + re.split(r"[，。]", MULTILINGUAL[0])
    text = ""
    while len(text) < chars:
        text += rng.choice(pool).strip() + rng.choice(["，", "；", "。", " "])
    return text[:chars].rstrip("，；。 ")


def amount(rng: random.Random) -> str:
    return f"{rng.randint(1, 9999):,}.{rng.randint(0, 99):02d}"


def stamp(rng: random.Random) -> str:
    return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"


def lines_html(lines: Iterable[str]) -> str:
    return "".join(f'<div class="l">{html.escape(line)}</div>' for line in lines)


def style(font_px: int, color: str = "#222", background: str = "#fff", family: str = f"{LATIN}, {CJK}", line: float = 1.5) -> str:
    return (
        f"body{{margin:24px;font:{font_px}px/{line} {family};color:{color};background:{background}}}"
        ".l{white-space:nowrap}h1,h2{font-weight:bold;margin:0 0 12px}"
    )


def article(rng: random.Random, vocabulary: Sequence[str], name: str, width: int, font_px: int, dark: bool = False) -> Layout:
    chars = int(width / (font_px * 0.58))
    paragraphs = [
        lines_html(words(rng, vocabulary, rng.randint(chars // 2, chars)) for _ in range(rng.randint(2, 4))) for _ in range(2)
    ]
    body = f'<h1 class="l">{html.escape(words(rng, vocabulary, 40).title())}</h1>' + "<br>".join(paragraphs)
    colors = {"color": "#e6e6e6", "background": "#16181c"} if dark else {}
    return Layout(name, "article", body, style(font_px, **colors), width)


def notice(rng: random.Random, name: str, width: int, font_px: int, scale: int = 1) -> Layout:
    chars = int((width - 48) / font_px)
    title = f'<h2 class="l" style="text-align:center">{rng.choice(["通知", "公告", "温馨提示"])}</h2>'
    body = lines_html(chinese(rng, rng.randint(chars // 2, chars)) for _ in range(rng.randint(4, 6)))
    footer = lines_html([f"发布时间：{stamp(rng)}"])
    return Layout(name, "notice", title + body + footer, style(font_px, family=f"{CJK}"), width, scale)


def receipt(rng: random.Random, name: str, width: int, font_px: int, scale: int) -> Layout:
    items = [(chinese(rng, rng.randint(3, 7)), amount(rng)) for _ in range(rng.randint(4, 7))]
    rows = "".join(
        f'<div class="l" style="display:flex;justify-content:space-between"><span>{html.escape(a)}</span><span>{b}</span></div>'
        for a, b in items
    )
    head = lines_html(["购物小票 RECEIPT", f"单号 No. {rng.randint(10**11, 10**12 - 1)}", stamp(rng)])
    foot = lines_html([f"合计 Total: {amount(rng)} 元", "谢谢惠顾 Thank you"])
    mono = style(font_px, family=f"'DejaVu Sans Mono', {CJK}")
    return Layout(name, "receipt", head + "<hr>" + rows + "<hr>" + foot, mono, width, scale)


def table(rng: random.Random, vocabulary: Sequence[str], name: str, width: int, font_px: int) -> Layout:
    header = ["Item", "Description", "Qty", "Unit price", "Amount"]
    rows = [header] + [
        [f"A-{rng.randint(100, 999)}", words(rng, vocabulary, 24), str(rng.randint(1, 20)), amount(rng), amount(rng)]
        for _ in range(rng.randint(4, 7))
    ]
    cells = "".join('<tr class="l">' + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    css = style(font_px) + "table{border-collapse:collapse}td{border:1px solid #999;padding:4px 10px;white-space:nowrap}"
    title = lines_html([f"Invoice No. {rng.randint(2020, 2026)}-{rng.randint(1000, 9999)}  Due {stamp(rng)[:10]}"])
    return Layout(name, "table", title + f"<table>{cells}</table>", css, width)


def mixed(rng: random.Random, vocabulary: Sequence[str], name: str, width: int, font_px: int, scale: int) -> Layout:
    chars = int((width - 48) / font_px)
    lines = []
    for _ in range(rng.randint(6, 9)):
        kind = rng.random()
        if kind < 0.4:
            lines.append(chinese(rng, rng.randint(chars // 2, chars)))
        elif kind < 0.7:
            lines.append(words(rng, vocabulary, rng.randint(chars, 2 * chars)))
        else:
            lines.append(f"{chinese(rng, 4)} {rng.randint(100, 99999)} {words(rng, vocabulary, 12)} {amount(rng)}")
    return Layout(name, "mixed", lines_html(lines), style(font_px), width, scale)


def health_screen(rng: random.Random, name: str, color: str, jpeg_quality: int | None) -> Layout:
    """A health-code app screen on a phone (390 CSS px at device pixel ratio 3)."""
    who = masked_name(rng)
    day = f"2022-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    when = f"{day} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    payload = f"HC:{rng.randint(0, 999999):06d}:{color}"
    buffer = io.BytesIO()
    qr_image(payload, CODE_COLORS[color]).save(buffer, "PNG")
    qr = base64.b64encode(buffer.getvalue()).decode()
    rgb = "rgb({},{},{})".format(*CODE_COLORS[color])
    body = (
        '<div style="background:#286edc;color:#fff;margin:-24px -24px 20px;padding:18px 24px">'
        '<div class="l" style="font-size:24px">健康码</div></div>'
        + lines_html([f"姓名：{who}", when])
        + f'<img src="data:image/png;base64,{qr}" style="display:block;width:240px;margin:16px auto;image-rendering:pixelated">'
        + f'<div class="l" style="color:{rgb}">{STATUS[color]}</div>'
        + '<div class="l" style="font-size:13px;color:#777;margin-top:24px">本码仅用于疫情防控</div>'
    )
    code = {"color": color, "qr": payload, "name": who, "datetime": when, "status": STATUS[color]}
    return Layout(name, "health_code", body, style(17, family=CJK, background="#f5f6f8"), 390, 3, jpeg_quality, code)


def layouts(count_per_kind: int, seed: int = 0) -> list[Layout]:
    """`count_per_kind` pages of each kind (article light and dark, notice, receipt, table, mixed, and
    a health-code screen per colour), of phone and desktop widths and small and large fonts; every
    third page re-encoded as JPEG at quality 60-80."""
    rng = random.Random(seed)
    prose = plain_words(english_prose())
    makers: list[Callable[[str], Layout]] = [
        lambda n: article(rng, prose, n, rng.choice([1000, 1280, 1440]), rng.choice([13, 15, 16, 18])),
        lambda n: article(rng, prose, n, rng.choice([390, 1000]), rng.choice([15, 17]), dark=True),
        lambda n: notice(rng, n, *rng.choice([(390, 17, 3), (800, 16, 1), (1000, 28, 1)])),
        lambda n: receipt(rng, n, 390, rng.choice([14, 15]), 3),
        lambda n: table(rng, prose, n, rng.choice([900, 1280]), rng.choice([13, 14, 15])),
        lambda n: mixed(rng, prose, n, *rng.choice([(390, 16, 3), (1000, 15, 1), (1280, 32, 1)])),
    ]
    pages = []
    for i in range(count_per_kind):
        for k, make in enumerate(makers):
            page = make(f"{seed}-{i}-{k}")
            quality = rng.randint(60, 80) if (i + k) % 3 == 2 else None
            pages.append(replace(page, jpeg_quality=quality))
        for color in CODE_COLORS:
            pages.append(health_screen(rng, f"{seed}-{i}-{color}", color, rng.randint(60, 80) if i % 2 else None))
    return pages


@contextlib.contextmanager
def headless_chromium() -> Iterator:
    """Debian's chromium, launched headless by playwright (which downloads no browser of its own)."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.is_file():
        raise BrowserMissing(f"{CHROMIUM} is missing: run `make system-deps` (installs Debian's chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def render(pages: Sequence[Layout]) -> list[Rendering]:
    """Full-page screenshots of `pages` in one headless chromium, with the text each shows."""
    out = []
    with headless_chromium() as browser:
        for layout in pages:
            context = browser.new_context(viewport={"width": layout.width, "height": 200}, device_scale_factor=layout.scale)
            page = context.new_page()
            page.set_content(f"<!doctype html><meta charset=utf-8><style>{layout.style}</style><body>{layout.body}</body>")
            page.evaluate("document.fonts.ready")
            shown = page.eval_on_selector_all(".l", "nodes => nodes.map((n) => n.innerText)")
            png = page.screenshot(full_page=True)
            context.close()
            out.append(finish(layout, png, [" ".join(text.split()) for text in shown]))
    return out


def finish(layout: Layout, png: bytes, lines: list[str]) -> Rendering:
    with Image.open(io.BytesIO(png)) as image:
        size = image.size
        data = png
        if layout.jpeg_quality:
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, "JPEG", quality=layout.jpeg_quality)
            data = buffer.getvalue()
    return Rendering(layout.name, layout.kind, data, [line for line in lines if line], size, layout.code)


def corpus(count_per_kind: int = 1, seed: int = 0) -> list[Rendering]:
    """The rendered corpus: `count_per_kind=1` (9 pages) for tests, more for benchmarks."""
    return render(layouts(count_per_kind, seed))
