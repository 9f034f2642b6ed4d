"""--input-data files: the same requests, written once for Triton's tensors and once as JSON bodies.

RADAR texts follow the field report (uniform 100-800 or 100-300 characters) from the kit's own
deterministic corpus. Another workload (OCR images, base64 in the JSON body) adds a writer here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kit.text.corpus import sample_texts


@dataclass
class InputSet:
    name: str
    texts: list[str]
    triton: Path  # {"data": [{"TEXT": [...]}]} for the `radar` model
    http: Path  # {"data": [{"payload": [{"text": ...}]}]} for perf_analyzer's openai service kind
    chunks_per_text: float = 0.0  # set by the sweep: requests/s x this = chunks/s


def radar_inputs(out_dir: Path, name: str, count: int, min_chars: int, max_chars: int, seed: int) -> InputSet:
    texts = sample_texts(count, min_chars, max_chars, seed=seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    triton, http = out_dir / f"{name}.triton.json", out_dir / f"{name}.http.json"
    triton.write_text(json.dumps({"data": [{"TEXT": {"content": [t], "shape": [1]}} for t in texts]}))
    http.write_text(json.dumps({"data": [{"payload": [{"text": t}]} for t in texts]}))
    return InputSet(name, texts, triton, http)
