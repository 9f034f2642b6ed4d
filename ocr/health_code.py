"""Health-code screenshots: the QR code's colour from its pixels, its payload, and the printed fields.

The colour is what the code's own modules are drawn in, not a guess from the text: a yellow code
whose status line was cut off is still yellow. OpenCV's QR detector works on one channel, and a
yellow module is pale in grey, so it looks at each pixel's darkest channel instead, where green,
yellow, red and black modules are all dark on a white ground.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

COLORS = ("green", "yellow", "red")
UNKNOWN = "unknown"
# OpenCV hue is 0-179. Orange-ish yellows (amber, #FFC107) count as yellow, as the apps mean them.
HUE_RANGES = {"red": ((0, 10), (160, 179)), "yellow": ((11, 34),), "green": ((35, 85),)}
MIN_SATURATION = 80
MIN_VALUE = 60
INK_LEVEL = 128  # darkest channel below this: a module pixel
MIN_COLOURED_SHARE = 0.5  # of module pixels; below it the code is black (or grey): no health colour

NAME_LABEL = re.compile(r"(?:姓名|名字)\s*[:：]?\s*(\S+)")
MASKED_NAME = re.compile(r"^(?=.*[\u4e00-\u9fff])[\u4e00-\u9fff*]{1,4}$")
DATETIME = re.compile(
    r"(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*日?\s*(\d{1,2})\s*[:：]\s*(\d{2})(?:\s*[:：]\s*(\d{2}))?"
)
STATUS_WORDS = ("绿码", "黄码", "红码", "未见异常", "健康状态", "隔离", "核酸", "异常")


@dataclass
class QrCode:
    payload: str | None  # None when the code was found but could not be decoded
    corners: np.ndarray  # float32 [4, 2]


def find_qr(image: np.ndarray) -> QrCode | None:
    """The code and its payload. OpenCV's classic detector first; where it finds or decodes nothing,
    its ArUco-based one, which finds the codes the classic one misses on some phone screenshots at
    device pixel ratio 3 (2 of 18 rendered screens, perf/results/ocr/sizing.json)."""
    ink = np.ascontiguousarray(image.min(axis=2))
    found = None
    for detector in (cv2.QRCodeDetector, cv2.QRCodeDetectorAruco):  # the second is made only when needed
        payload, points, _ = detector().detectAndDecode(ink)
        if points is not None and len(points) > 0:
            found = QrCode(payload or None, points.reshape(-1, 2)[:4].astype(np.float32))
            if payload:
                return found
    return found


def code_color(image: np.ndarray, corners: np.ndarray) -> str:
    """Majority hue of the coloured module pixels inside the code, or unknown for a black code."""
    mask = np.zeros(image.shape[:2], dtype=np.uint8)
    cv2.fillPoly(mask, [np.round(corners).astype(np.int32)], 1)
    inside = mask.astype(bool)
    pixels = image[inside]
    modules = pixels.min(axis=1) < INK_LEVEL
    if modules.sum() < 50:
        return UNKNOWN
    hsv = cv2.cvtColor(pixels[modules].reshape(-1, 1, 3), cv2.COLOR_BGR2HSV).reshape(-1, 3)
    hue, sat, val = hsv[:, 0].astype(int), hsv[:, 1], hsv[:, 2]
    coloured = (sat >= MIN_SATURATION) & (val >= MIN_VALUE)
    if coloured.mean() < MIN_COLOURED_SHARE:
        return UNKNOWN
    votes = {
        name: int(sum(((hue >= lo) & (hue <= hi) & coloured).sum() for lo, hi in ranges)) for name, ranges in HUE_RANGES.items()
    }
    best = max(votes, key=votes.get)
    return best if votes[best] >= MIN_COLOURED_SHARE * coloured.sum() else UNKNOWN


def normalise_text(text: str) -> str:
    return text.replace("＊", "*").replace("※", "*").strip()


def find_name(texts: Sequence[str]) -> str | None:
    """`姓名：张*三` anywhere, else a line that is only a masked name (`张*三`, `李*`)."""
    for text in map(normalise_text, texts):
        match = NAME_LABEL.search(text)
        if match:
            return match.group(1)
    for text in map(normalise_text, texts):
        if "*" in text and MASKED_NAME.match(text):
            return text
    return None


def find_datetime(texts: Sequence[str]) -> str | None:
    """`YYYY-MM-DD HH:MM[:SS]`, also when the date and the time were read as two lines."""
    candidates = list(texts) + [a + " " + b for a, b in zip(texts, texts[1:])]
    for text in candidates:
        match = DATETIME.search(text)
        if match:
            year, month, day, hour, minute, second = match.groups()
            stamp = f"{year}-{int(month):02d}-{int(day):02d} {int(hour):02d}:{minute}"
            return stamp + (f":{second}" if second else "")
    return None


def find_status(texts: Sequence[str]) -> str | None:
    for text in texts:
        if any(word in text for word in STATUS_WORDS):
            return text.strip()
    return None


def read_health_code(image: np.ndarray, qr: QrCode | None, texts: Sequence[str]) -> dict:
    """The JSON document `health_code` returns, from the picture, its QR code and its recognised lines."""
    return {
        "color": code_color(image, qr.corners) if qr is not None else UNKNOWN,
        "qr": qr.payload if qr is not None else None,
        "texts": list(texts),
        "fields": {"name": find_name(texts), "datetime": find_datetime(texts), "status": find_status(texts)},
    }
