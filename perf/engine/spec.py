"""Sweep specs: small declarative JSON files under perf/specs/.

A spec names its workload (default "radar"), the model folder, the input sets, the target families
with their settings, and the loads: closed-loop points of the `window`'s warm-up and duration (perf.engine.load).
With a `probe`, each family's settings are probed at one load and the best is swept; without one, every setting is
swept; with `rounds`, every target runs at once and the loads go round in turns (perf.engine.sweep). One ONNX file
of the model folder runs per spec: the kit's profile setting `graph` and the limit's and a baseline's `graph` name it.

Also: `profile` and `placement` (what kit variants are built from: perf.engine.targets), `gpu` (sample
the GPU over every point), `budget` (estimates for a deadline: perf.engine.budget), `goals` (the
targets judged in the report: perf.engine.verdicts), `accuracy` (served results against the workload's
direct reference). `extends` names a spec this one overrides key by key; a spec with a `suite` holds
several specs (name -> spec, each may `extends` another file) run one after another into subfolders,
under one deadline; a part set to null leaves out the part of the spec it extends.
"""

from __future__ import annotations

import json
from pathlib import Path

from perf.engine.load import Window
from perf.engine.targets import merged

SPECS = Path(__file__).resolve().parents[1] / "specs"


def spec_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if not path.is_file():
        path = SPECS / f"{name_or_path}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no sweep spec {name_or_path!r} (known: {sorted(p.stem for p in SPECS.glob('*.json'))})")
    return path


def read_spec(path: Path) -> dict:
    """A spec file with the spec it `extends` laid under it."""
    spec = json.loads(path.read_text())
    if "extends" in spec:
        spec = merged(read_spec(spec_path(spec.pop("extends"))), spec)
    return spec


def check(spec: dict, where: str) -> None:
    """A sweep's way of running its targets holds together (a spec without targets has none to run)."""
    if "graphs" in spec:
        raise ValueError(f"{where}: `graphs` (a run per graph) is gone: name one file as the kit's and the limit's `graph`")
    if "targets" not in spec:
        return
    if "rounds" in spec and "probe" in spec:
        raise ValueError(f"{where}: `rounds` keep every setting running in turns; a `probe` picks one: use one of them")
    if "requests" in spec or "window" not in spec:
        raise ValueError(f"{where}: loads are closed-loop `window`s (warmup_s, duration_s); perf_analyzer's `requests` are gone")


def load_spec(name_or_path: str) -> dict:
    path = spec_path(name_or_path)
    spec = read_spec(path)
    spec.pop("path", None)
    if "suite" in spec:
        spec["suite"] = {name: part for name, part in spec["suite"].items() if part is not None}
    for name, part in spec.get("suite", {}).items():
        if "extends" in part:
            part = spec["suite"][name] = merged(read_spec(spec_path(part.pop("extends"))), part)
            part.pop("path", None)
        check(part, f"{path} ({name})")
        part["path"] = f"{path}#{name}"
    if "suite" not in spec:
        check(spec, str(path))
    spec["path"] = str(path)
    return spec


def window(spec: dict, concurrency: int) -> Window:
    return Window(concurrency, spec["window"]["warmup_s"], spec["window"]["duration_s"])


def sweep_loads(spec: dict, input_name: str) -> list[Window]:
    """The loads of one input set: the spec's `sweep` for its input, `extra[input_name]` for the others."""
    sweep = spec["sweep"] if input_name == spec["sweep"]["input"] else spec["extra"][input_name]
    return [window(spec, c) for c in sweep.get("concurrency", [])]


def probe_load(spec: dict) -> Window:
    return window(spec, spec["probe"]["concurrency"])
