"""A text's tokens as the model's tokenizer makes them, for a client that counts or inspects them (TEI's /tokenize,
on the door): each token's id, its text and the characters it covers. The text is read whole, not chunked: the model
reads it in chunks or windows of these tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer


@dataclass
class Tokenized:
    """`ids`, the tokenizer's `tokens` (a special token's name: [CLS], <s>) and `spans`, each token's characters
    [start, end) in the text: [-1, -1] for a special token, which covers none."""

    ids: np.ndarray
    tokens: list[str]
    spans: np.ndarray


def tokenized(tokenizer: Tokenizer, text: str, add_special_tokens: bool = True) -> Tokenized:
    encoding = tokenizer.encode(text, add_special_tokens=add_special_tokens)
    spans = np.array(encoding.offsets, dtype=np.int32).reshape(-1, 2)
    spans[np.array(encoding.special_tokens_mask, dtype=bool)] = -1
    return Tokenized(np.array(encoding.ids, dtype=np.int32), list(encoding.tokens), spans)
