"""What a chaos run's clients send, and the right answer to each, computed once in this process before the load
starts: RADAR's texts through the kit's own text pipeline on the exported FP32 graph (as perf's accuracy check runs
it), resnet50's images each alone and unpadded through its exported graph, and a user spec's rows through its graph
on ONNX Runtime. A served answer is right when it is within the tolerance the served tests hold that model to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clients.results import RadarResult
from kit.adapters.artifacts import text_pipeline
from kit.adapters.settings import TextSettings
from kit.control.configs import parameters, parse_config
from kit.control.specs import ModelSpec
from kit.runners.onnx import make_session
from perf.engine.limit import CORES
from perf.workloads.pixels import reference_probabilities, sample_images
from perf.workloads.radar_limit import reference_logits
from samples.texts import sample_texts

TEXT_ATOL = 1e-4  # the fused graph served in length buckets against FP32 on each chunk alone (tests/served/test_radar.py)
IMAGE_ATOL = 1e-5  # padded batches against each image alone (tests/served/test_pixel_models.py)
ROWS_ATOL = 1e-5  # batched rows against the rows alone (tests/served/test_brought_models.py)


@dataclass
class Cases:
    """One model's inputs, the right answer to each, and the check of a served answer against it."""

    model: str
    inputs: list
    expected: list
    right: Callable[[object, object], bool]

    def check(self, index: int, answer) -> bool:
        return self.right(answer, self.expected[index % len(self.expected)])

    def explain(self, index: int, answer) -> str:
        """What a wrong answer is: another input's right answer (an answer sent to the wrong request), or neither."""
        others = [j for j, want in enumerate(self.expected) if self.right(answer, want)]
        own = index % len(self.expected)
        return f"the answer to input {own} was " + (f"input {others}'s" if others else "no input's")

    def input(self, index: int):
        return self.inputs[index % len(self.inputs)]


def config(repository: Path, model: str):
    return parse_config((repository / model / "config.pbtxt").read_text())


def same_text_answer(got: RadarResult, want: RadarResult) -> bool:
    return (
        [tuple(span) for span in got.chunk_spans] == [tuple(span) for span in want.chunk_spans]
        and np.allclose(got.chunk_scores, want.chunk_scores, atol=TEXT_ATOL, rtol=0)
        and abs(got.score - want.score) <= TEXT_ATOL
    )


def radar_cases(repository: Path, export: Path, count: int, seed: int, chars: tuple[int, int] = (100, 1500)) -> Cases:
    """Texts of `chars` characters (100-1,500: 1-6 chunks), each answered as the kit's own pipeline answers it."""
    texts = sample_texts(count, *chars, seed=seed)
    pipeline = text_pipeline(export, TextSettings.from_parameters(parameters(config(repository, "radar"))))
    _, logits = reference_logits(export, parameters(config(repository, "radar_classifier")))
    expected = []
    for text in texts:
        plan = pipeline.plan(text)
        result = pipeline.finish(plan, [logits(g.input_ids, g.attention_mask) for g in plan.groups])
        expected.append(RadarResult(result.score, list(result.chunk_scores), [tuple(s) for s in result.spans.tolist()]))
    return Cases("radar", texts, expected, same_text_answer)


def image_cases(repository: Path, export: Path, count: int, seed: int, sides: tuple[int, int] = (64, 128)) -> Cases:
    """Images [1, 3, H, W] of sides in `sides`, small so that images do not take the whole machine."""
    images = sample_images(count, seed, *sides)
    backbone = config(repository, "resnet50_backbone")
    _, probabilities = reference_probabilities(export, parameters(backbone), backbone.output[0].dims[0])
    expected = [probabilities(image) for image in images]
    return Cases("resnet50", images, expected, lambda got, want: np.allclose(got, want, atol=IMAGE_ATOL, rtol=0))


def rows_cases(spec: ModelSpec, repository: Path, count: int, seed: int, vocabulary: int = 200) -> Cases:
    """Requests of 1-4 rows of a user's text graph (token ids and their mask, 8-64 long), as any client of an `onnx`
    spec sends them."""
    rng = np.random.default_rng(seed)
    session = make_session(spec.source_path, CORES)
    outputs = [output.name for output in config(repository, spec.name).output]
    inputs, expected = [], []
    for _ in range(count):
        ids = rng.integers(5, vocabulary, size=(int(rng.integers(1, 5)), int(rng.integers(8, 65))), dtype=np.int64)
        arrays = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        inputs.append(arrays)
        expected.append(dict(zip(outputs, session.run(outputs, arrays))))
    return Cases(spec.name, inputs, expected, same_rows)


def same_rows(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> bool:
    return all(np.allclose(np.asarray(got[name], np.float64), value, atol=ROWS_ATOL, rtol=0) for name, value in want.items())
