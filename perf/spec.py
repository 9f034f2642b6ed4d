"""Sweep specs: small declarative JSON (or YAML) files under perf/specs/."""

from __future__ import annotations

import json
import math
from pathlib import Path

from perf.perf_analyzer import Load

SPECS = Path(__file__).resolve().parent / "specs"
FAMILIES = ("kit", "flask", "gunicorn", "uvicorn", "batcher")


def load_spec(name_or_path: str) -> dict:
    path = Path(name_or_path)
    if not path.is_file():
        path = next((p for p in (SPECS / f"{name_or_path}.{e}" for e in ("json", "yaml", "yml")) if p.is_file()), path)
    if not path.is_file():
        raise FileNotFoundError(f"no sweep spec {name_or_path!r} (known: {sorted(p.stem for p in SPECS.glob('*.*'))})")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        spec = yaml.safe_load(path.read_text())
    else:
        spec = json.loads(path.read_text())
    unknown = set(spec.get("targets", {})) - set(FAMILIES)
    if unknown:
        raise ValueError(f"{path}: unknown target families {sorted(unknown)} (known: {FAMILIES})")
    spec["path"] = str(path)
    return spec


def requests_for(spec: dict, concurrency: int) -> int:
    """A fixed number of requests per point: per_client x clients, within [min, max]."""
    r = spec["requests"]
    return max(r["min"], min(r["max"], r["per_client"] * concurrency))


def sweep_loads(spec: dict) -> list[Load]:
    sweep = spec["sweep"]
    loads = [Load(requests_for(spec, c), concurrency=c) for c in sweep.get("concurrency", [])]
    loads += [Load(max(spec["requests"]["min"], math.ceil(r)), rate=r) for r in sweep.get("rates", [])]
    return loads


def probe_load(spec: dict) -> Load:
    probe = spec["probe"]
    return Load(probe["requests"], concurrency=probe["concurrency"])
