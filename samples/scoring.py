"""How read text is judged against the text a page is known to show.

Character accuracy is 1 - (edit distance / characters of the known text), over pages read top to
bottom and joined line after line, so that a lost line, a wrong character and a lost space each
cost what they cost a reader. With `spaces=False` whitespace is dropped on both sides first (the
measure the generated PIL pages were judged by, where spacing is an artefact of the drawing).
"""

from __future__ import annotations

from collections.abc import Sequence

from rapidfuzz.distance import Levenshtein


def page_text(lines: Sequence[str], spaces: bool = True) -> str:
    return " ".join(" ".join(lines).split()) if spaces else "".join("".join(lines).split())


def character_errors(predicted: Sequence[str], truth: Sequence[str], spaces: bool = True) -> tuple[int, int]:
    """(edit distance, characters of the known text) for one page."""
    known = page_text(truth, spaces)
    return Levenshtein.distance(page_text(predicted, spaces), known), len(known)


def character_accuracy(predicted: Sequence[Sequence[str]], truth: Sequence[Sequence[str]], spaces: bool = True) -> float:
    """Over all pages: 1 - total edit distance / total characters of the known text."""
    errors, total = map(sum, zip(*(character_errors(p, t, spaces) for p, t in zip(predicted, truth, strict=True))))
    return 1 - errors / total
