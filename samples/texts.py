"""Deterministic natural-language sample texts, with no data set to download.

English prose comes from the Python documentation topics that ship with the interpreter
(`pydoc_data`); a few sentences in Chinese, Korean and emoji stand for the multilingual tail that a
byte-level BPE tokenizer turns into many more tokens per character. Used to choose length buckets,
and by tests and benchmarks that need texts of realistic lengths.
"""

from __future__ import annotations

import random
import re

MULTILINGUAL = [
    "人工智能生成的文本越来越难以与人类写作区分，因此检测工具需要处理各种语言和长度的输入。",
    "이 문장은 한국어로 작성되었으며, 바이트 수준 토크나이저에서는 문자당 더 많은 토큰이 필요합니다.",
    "Emoji make tokenizers work hard 🤖🧠✨👩‍💻🏳️‍🌈 and so do mixed scripts like café, naïve, Ångström.",
]


def english_prose() -> str:
    from pydoc_data.topics import topics

    text = " ".join(topics[key] for key in sorted(topics))
    return re.sub(r"\s+", " ", text)


def sample_texts(count: int, min_chars: int, max_chars: int, seed: int = 0, multilingual: float = 0.0) -> list[str]:
    """`count` texts with lengths uniform in [min_chars, max_chars], cut from the prose at word starts.

    With `multilingual` > 0, that fraction of the texts is built from the multilingual sentences.
    """
    rng = random.Random(seed)
    prose = english_prose()
    word_starts = [m.start() for m in re.finditer(r"(?<= )\S", prose)]
    texts = []
    for _ in range(count):
        length = rng.randint(min_chars, max_chars)
        if rng.random() < multilingual:
            pool = " ".join(rng.choice(MULTILINGUAL) for _ in range(length // 40 + 2))
            texts.append(pool[:length])
            continue
        start = rng.choice(word_starts[: len(word_starts) - 200])
        texts.append(prose[start : start + length])
    return texts
