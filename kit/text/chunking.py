"""Split long text into chunks of at most N characters, keeping sentences and words whole when possible.

Spans are [start, end) character offsets that cover the text exactly, in order: nothing dropped,
nothing repeated, so clients can map every chunk score back onto the text.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable

# A sentence ends at . ! ? (and their CJK forms) plus closing quotes/brackets and the whitespace
# after them; CJK full stops need no space; a line break always ends a unit.
SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+|[。！？]+[”’）」』]*\s*|\n\s*")
WORD_START = re.compile(r"\s+")
ZERO_WIDTH_JOINER = "\u200d"
# Characters that belong to the one before them: variation selectors and skin-tone modifiers.
JOINED_TO_PREVIOUS = re.compile("[\u200d\ufe00-\ufe0f\U0001f3fb-\U0001f3ff\U000e0100-\U000e01ef]")


def boundaries(pattern: re.Pattern, text: str) -> list[int]:
    return [m.end() for m in pattern.finditer(text)]


def safe_cut(text: str, start: int, cut: int) -> int:
    """Move a hard cut back so it does not split CR LF, a combining mark or an emoji sequence."""
    position = cut
    while position > start + 1 and splits_cluster(text, position):
        position -= 1
    return cut if splits_cluster(text, position) else position


def splits_cluster(text: str, position: int) -> bool:
    if position <= 0 or position >= len(text):
        return False
    before, after = text[position - 1], text[position]
    return (
        (before == "\r" and after == "\n")
        or before == ZERO_WIDTH_JOINER
        or unicodedata.combining(after) > 0
        or JOINED_TO_PREVIOUS.match(after) is not None
    )


def pack(text: str, start: int, end: int, max_chars: int, levels: list[list[int]]) -> list[tuple[int, int]]:
    """Greedy: each chunk ends at the last boundary of the coarsest level that fits; a unit longer
    than max_chars is packed again at the next finer level, and cut hard below the finest."""
    if not levels:
        return hard_cut(text, start, end, max_chars)
    bounds, finer = levels[0], levels[1:]
    spans = []
    position = start
    while end - position > max_chars:
        index = bisect.bisect_right(bounds, position + max_chars) - 1
        if index >= 0 and bounds[index] > position:
            spans.append((position, bounds[index]))
            position = bounds[index]
            continue
        following = bisect.bisect_right(bounds, position)
        unit_end = min(bounds[following], end) if following < len(bounds) else end
        spans += pack(text, position, unit_end, max_chars, finer)
        position = unit_end
    if position < end:
        spans.append((position, end))
    return spans


def hard_cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    spans = []
    while end - start > max_chars:
        cut = safe_cut(text, start, start + max_chars)
        spans.append((start, cut))
        start = cut
    spans.append((start, end))
    return spans


def split_text(text: str, max_chars: int = 300) -> list[tuple[int, int]]:
    """Chunks of at most `max_chars` characters: whole sentences, else whole words, else hard cuts."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    if not text:
        return []
    levels = [boundaries(SENTENCE_END, text), boundaries(WORD_START, text)]
    return pack(text, 0, len(text), max_chars, levels)


def split_to_token_limit(
    text: str, spans: list[tuple[int, int]], count_tokens: Callable[[str], int], max_tokens: int
) -> list[tuple[int, int]]:
    """Split further every span whose token count exceeds `max_tokens` instead of truncating it.

    300 characters of Chinese, Korean or emoji can exceed a 512-token limit under byte-level BPE.
    A span is halved at the word boundary nearest its middle (else at its middle), recursively.
    """
    result = []
    pending = list(reversed(spans))
    while pending:
        start, end = pending.pop()
        if count_tokens(text[start:end]) <= max_tokens:
            result.append((start, end))
            continue
        if end - start == 1:
            raise ValueError(f"the character at {start} alone takes more than {max_tokens} tokens")
        middle = (start + end) // 2
        words = [m.end() for m in WORD_START.finditer(text, start, end) if start < m.end() < end]
        cut = min(words, key=lambda b: abs(b - middle)) if words else safe_cut(text, start, middle)
        pending += [(cut, end), (start, cut)]
    return result
