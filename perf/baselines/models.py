"""The model a per-request design (perf.baselines.flask_app, fastapi_app) serves, by BASELINE_MODEL: `radar`
(perf.baselines.radar_model: RADAR or a text model's chunking, buckets and graph), `ocr` (perf.baselines.ocr_model),
or `spec`, the default: a spec's model by its task (perf.baselines.spec_model). Each answers `predict(body)`, the
JSON body in, its answer out, raising kit.pipelines.errors.InputError for a body the kit would refuse."""

from __future__ import annotations

import importlib
import os

# Imported by name: a process loads only its own model's modules, whose memory the benchmark measures.
MODULES = {"radar": "perf.baselines.radar_model", "ocr": "perf.baselines.ocr_model", "spec": "perf.baselines.spec_model"}


def from_env():
    kind = os.environ.get("BASELINE_MODEL", "spec")
    if kind not in MODULES:
        raise ValueError(f"BASELINE_MODEL={kind!r} is not one of {sorted(MODULES)}")
    return importlib.import_module(MODULES[kind]).from_env()
