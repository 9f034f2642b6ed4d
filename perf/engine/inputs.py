"""A run's requests, written once for Triton's tensors and once as the baselines' JSON bodies.

perf_analyzer reads both from --input-data files: {"data": [{"TEXT": ...}]} for the entry model,
{"data": [{"payload": [{...}]}]} for its `openai` service kind (a JSON POST per request). A
closed-loop workload (perf.engine.load) sends its `items` itself and writes no file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class InputSet:
    name: str
    items: list  # one per request: texts, encoded images, or tensors by input name
    per_request: float  # what a request carries in the workload's unit: RADAR's chunks per text, one image
    triton: Path | None = None
    http: Path | None = None


def write_pair(out_dir: Path, name: str, triton: list[dict], http: list[dict]) -> tuple[Path, Path]:
    """The same requests as Triton inputs and as JSON bodies; returns (triton, http) --input-data files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / f"{name}.triton.json", out_dir / f"{name}.http.json"
    paths[0].write_text(json.dumps({"data": triton}))
    paths[1].write_text(json.dumps({"data": [{"payload": [body]} for body in http]}))
    return paths
