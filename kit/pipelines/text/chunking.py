"""Split long text into chunks of at most N characters, keeping sentences and words whole when possible.

Spans are [start, end) character offsets that cover the text exactly, in order: nothing dropped,
nothing repeated, so clients can map every chunk score back onto the text.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Callable

# A sentence ends at . ! ? (and their CJK forms) plus closing quotes/brackets and the whitespace
# after them; CJK full stops need no space; a line break always ends a unit. Every boundary is the
# end of a whitespace run (or a CJK stop), so chunks start with non-whitespace where they can.
SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+|[。！？]+[”’）」』]*\s*|[\r\n]\s*")
WORD_START = re.compile(r"\s+")
ZERO_WIDTH_JOINER = "\u200d"
# Characters that belong to the one before them, beyond the marks (category M): zero-width joiner,
# variation selectors, skin-tone modifiers, emoji tag characters, Hangul medial/final jamo.
JOINED_TO_PREVIOUS = re.compile(
    "[\u200d\ufe00-\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f\U000e0100-\U000e01ef\u1160-\u11ff\ud7b0-\ud7ff]"
)


def splits_cluster(text: str, position: int) -> bool:
    """Whether cutting before text[position] separates characters that display as one."""
    if position <= 0 or position >= len(text):
        return False
    before, after = text[position - 1], text[position]
    return (
        (before == "\r" and after == "\n")
        or (before == ZERO_WIDTH_JOINER and not after.isspace())
        or unicodedata.category(after).startswith("M")
        or JOINED_TO_PREVIOUS.match(after) is not None
    )


def boundaries(pattern: re.Pattern, text: str) -> list[int]:
    return [m.end() for m in pattern.finditer(text) if not splits_cluster(text, m.end())]


def safe_cut(text: str, start: int, cut: int) -> int:
    """Move a hard cut back (not to `start`) until it splits no cluster; keep it if that fails."""
    for position in range(cut, start, -1):
        if not splits_cluster(text, position):
            return position
    return cut


def hard_cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    spans = []
    while end - start > max_chars:
        cut = safe_cut(text, start, start + max_chars)
        spans.append((start, cut))
        start = cut
    spans.append((start, end))
    return spans


def pack(text: str, start: int, end: int, max_chars: int, levels: list[Callable[[], list[int]]]) -> list[tuple[int, int]]:
    """Greedy: each chunk ends at the last boundary of the coarsest level that fits.

    A unit longer than max_chars (a long sentence, a long word) is packed at the next finer level,
    down to hard cuts; its last piece then starts the next chunk, so that it shares that chunk with
    the units after it instead of becoming a short chunk of its own. A level's boundaries are found
    when first needed (`levels` are cached calls): a text that fits needs none, and most texts never
    need their word starts, which cost the most to find.
    """
    if not levels:
        return hard_cut(text, start, end, max_chars)
    spans = []
    position = start
    while end - position > max_chars:
        bounds = levels[0]()
        index = bisect.bisect_right(bounds, position + max_chars) - 1
        if index >= 0 and bounds[index] > position:
            spans.append((position, bounds[index]))
            position = bounds[index]
            continue
        following = bisect.bisect_right(bounds, position)
        unit_end = min(bounds[following], end) if following < len(bounds) else end
        pieces = pack(text, position, unit_end, max_chars, levels[1:])
        spans += pieces[:-1]
        position = pieces[-1][0]
    spans.append((position, end))
    return spans


def split_text(text: str, max_chars: int = 300) -> list[tuple[int, int]]:
    """Chunks of at most `max_chars` characters: whole sentences, else whole words, else hard cuts."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    if not text:
        return []
    levels = [functools.cache(functools.partial(boundaries, pattern, text)) for pattern in (SENTENCE_END, WORD_START)]
    return pack(text, 0, len(text), max_chars, levels)


def halfway(text: str, start: int, end: int) -> int:
    """A cut in the middle half of (start, end): the sentence end, else the word start, nearest the
    middle; else the position nearest the middle that splits no cluster."""
    middle = (start + end) // 2
    low, high = start + (end - start) // 4, end - (end - start) // 4
    for pattern in (SENTENCE_END, WORD_START):
        cuts = [
            m.end()
            for m in pattern.finditer(text, start, end)
            if low <= m.end() <= high and start < m.end() < end and not splits_cluster(text, m.end())
        ]
        if cuts:
            return min(cuts, key=lambda cut: abs(cut - middle))
    for offset in range(end - start):
        for cut in (middle - offset, middle + offset):
            if start < cut < end and not splits_cluster(text, cut):
                return cut
    return middle


def split_to_token_limit(
    text: str, spans: list[tuple[int, int]], count_tokens: Callable[[str], int], max_tokens: int
) -> list[tuple[int, int]]:
    """Split further every span whose token count exceeds `max_tokens`, instead of truncating it.

    300 characters of Chinese, Korean or emoji can exceed a 512-token limit under byte-level BPE.
    Such a span is cut roughly in half (see `halfway`) and each half checked again.
    """
    result = []
    pending = list(reversed(spans))
    while pending:
        start, end = pending.pop()
        if count_tokens(text[start:end]) <= max_tokens:
            result.append((start, end))
            continue
        if end - start == 1:
            raise ValueError(f"the character {text[start]!r} at offset {start} alone takes more than {max_tokens} tokens")
        cut = halfway(text, start, end)
        pending += [(cut, end), (start, cut)]
    return result
