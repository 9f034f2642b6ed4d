"""--input-data files: the same requests, written once for Triton's tensors and once as JSON bodies.

RADAR texts follow the field report (uniform 100-800 or 100-300 characters) from the kit's own
deterministic corpus. OCR images are the generated documents and health-code screenshots of
kit.ocr.synthetic (perf/ocr_client.py's sample), as base64 text for every target, as web clients
send them: in Triton's `IMAGE` BYTES element (the `ocr` model takes raw bytes or base64 text) and
in the baselines' JSON body, so both sides decode the same base64. (perf_analyzer's `b64` form
would put the raw bytes on the wire, but it copies each request's inputs into its profile export,
which raw PNG bytes leave unparseable.)
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

from kit.text.corpus import sample_texts


@dataclass
class InputSet:
    name: str
    items: list  # one per request: texts (RADAR) or encoded images (OCR)
    triton: Path  # {"data": [{"TEXT": ...}]} for the entry model (`radar`, `ocr`)
    http: Path  # {"data": [{"payload": [{...}]}]} for perf_analyzer's openai service kind
    unit: str = "chunks"  # what a served request is counted in: requests/s x per_request = unit/s
    per_request: float = 0.0  # RADAR: chunks per text (set by the sweep); OCR: 1 image


def write_pair(out_dir: Path, name: str, triton: list[dict], http: list[dict]) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / f"{name}.triton.json", out_dir / f"{name}.http.json"
    paths[0].write_text(json.dumps({"data": triton}))
    paths[1].write_text(json.dumps({"data": [{"payload": [body]} for body in http]}))
    return paths


def radar_inputs(out_dir: Path, name: str, count: int, min_chars: int, max_chars: int, seed: int) -> InputSet:
    texts = sample_texts(count, min_chars, max_chars, seed=seed)
    triton, http = write_pair(out_dir, name, [{"TEXT": {"content": [t], "shape": [1]}} for t in texts], [{"text": t} for t in texts])
    return InputSet(name, texts, triton, http)


def ocr_inputs(out_dir: Path, name: str, count: int, seed: int) -> InputSet:
    """`count` images, documents and screenshots alternating (perf.ocr_client.sample_images)."""
    from perf.ocr_client import sample_images

    images = sample_images(count, seed)
    encoded = [base64.b64encode(data).decode("ascii") for data in images]
    triton, http = write_pair(out_dir, name, [{"IMAGE": {"content": [e], "shape": [1]}} for e in encoded], [{"image": e} for e in encoded])
    return InputSet(name, images, triton, http, unit="images", per_request=1.0)
