"""The requests of a GPU run, made the same way in the orchestrator and in the prepare child: RADAR's texts of
100-800 characters (samples.texts, the field report's lengths) and ResNet's images of (3, 224±50, 224±50)
(perf/specs/resnet.json's input set)."""

from __future__ import annotations

import json

import numpy as np

from perf.engine.inputs import InputSet
from perf.engine.spec import load_spec
from perf.gpu.plan import Mode
from perf.workloads.resnet import sample_images
from samples.texts import sample_texts

TEXT_SEED, MIN_CHARS, MAX_CHARS = 0, 100, 800


def radar_texts(mode: Mode) -> list[str]:
    return sample_texts(mode.texts, MIN_CHARS, MAX_CHARS, seed=TEXT_SEED)


def resnet_input() -> dict:
    (spec_input,) = load_spec("resnet")["inputs"]
    return spec_input


def resnet_images() -> list[np.ndarray]:
    """[1, 3, H, W] FP32 images, H and W each uniform in 174..274."""
    s = resnet_input()
    return sample_images(s["count"], s["seed"], s["min_side"], s["max_side"])


def radar_sets(texts: list[str], chunks_per_text: float) -> tuple[InputSet, InputSet]:
    """The texts as the kit's tensors (TEXT, BYTES [1]) and as the baselines' JSON bodies."""
    tensors = [{"TEXT": np.array([t.encode("utf-8")], dtype=np.object_)} for t in texts]
    bodies = [json.dumps({"text": t}).encode("utf-8") for t in texts]
    return InputSet("texts", tensors, chunks_per_text), InputSet("texts", bodies, chunks_per_text)


def resnet_set(images: list[np.ndarray]) -> InputSet:
    return InputSet("mixed", [{"INPUT": image} for image in images], 1.0)
