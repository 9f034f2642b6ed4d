"""An image-classification spec's model (docs/MODELS.md) as a workload: `python -m perf sweep --model NAME` measures
it the way the shipped models are measured, with nothing written for it.

The same generated pictures (smooth random patterns of several sizes and aspect ratios, PNG and JPEG) go to every
design: the kit over gRPC (the `NAME` ensemble: `NAME_pixels` decodes and preprocesses, `NAME_classifier` batches the
graph), the kit through the door's route, and the hand-rolled designs on the spec's export (perf/baselines/*_image*.py:
Flask per request, FastAPI + uvicorn per request, FastAPI with an asyncio batcher), which decode with the kit's limits,
preprocess with the same kit.pipelines.image_processing.Preprocessing and run the same graph. The limit is that same
work in this process at each of the spec's batch sizes; the accuracy check compares every label's served probability
with it, image by image.
"""

from __future__ import annotations

import base64
import functools
import json
from pathlib import Path

import numpy as np
from PIL import Image

from kit.control.exports import export
from kit.control.specs import ModelSpec
from kit.control.tasks import task_of
from perf.baselines.image_model import ImageModel
from perf.engine.inputs import InputSet
from perf.engine.limit import CORES, by_cores, measured, repeated
from perf.engine.load import probabilities_check, served_answers
from perf.engine.tables import limit_section
from perf.engine.workload import Workload
from perf.workloads.tensor import SpecBaselines
from samples.images import encode

ASPECTS = ((1, 1), (4, 3), (3, 4), (16, 9), (9, 16))  # width : height of the generated pictures, in turn
FORMATS = (("PNG", {}), ("JPEG", {"quality": 90}))  # in turn, after the aspect ratios
LIMIT_PASSES = 3  # the limit runs the input set's images this many times at each batch size, unless the spec says


def picture(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """A coarse random pattern smoothly upscaled, with a little noise: as costly to encode, decode and resample as a
    photograph, more or less, and different from picture to picture."""
    coarse = Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8))
    smooth = np.asarray(coarse.resize((width, height), Image.Resampling.BICUBIC), dtype=np.int16)
    noise = rng.integers(-10, 11, (height, width, 3), dtype=np.int16)
    return Image.fromarray(np.clip(smooth + noise, 0, 255).astype(np.uint8), "RGB")


def pictures(count: int, seed: int, min_side: int, max_side: int) -> list[bytes]:
    """`count` encoded pictures: the longer side uniform in [min_side, max_side], the aspect ratios and formats in
    turn."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        (across, down), (fmt, options) = ASPECTS[i % len(ASPECTS)], FORMATS[i // len(ASPECTS) % len(FORMATS)]
        longer = int(rng.integers(min_side, max_side + 1))
        width, height = (longer, longer * down // across) if across >= down else (longer * across // down, longer)
        out.append(encode(picture(rng, width, height), fmt, **options))
    return out


def image_inputs(spec_input: dict) -> InputSet:
    """A spec's pictures: raw in Triton's IMAGE (the pixels model decodes bytes, not base64), base64 in the JSON
    bodies of the door and the baselines."""
    s = spec_input
    images = pictures(s["count"], s["seed"], s["min_side"], s["max_side"])
    tensors = [{"IMAGE": np.array([[data]], dtype=np.object_)} for data in images]
    bodies = [json.dumps({"image": base64.b64encode(data).decode("ascii")}).encode() for data in images]
    return InputSet(s["name"], images, 1.0, tensors=tensors, bodies=bodies)


class ImageModelWorkload(SpecBaselines, Workload):
    """The workload of one image-classification spec's model."""

    request = item = "image"
    sweep_spec = "model-image"  # perf/specs/model-image.json
    needs = ("model.onnx", "export.json")  # and the preprocessing, which the builder checks
    endpoint = "predict"
    load_note = (
        "an image per request: its encoded bytes in `IMAGE` to the kit over gRPC (the pixels model takes the file's "
        'bytes, not base64), `{"image": "<base64>"}` to the door (which decodes the base64 and sends Triton the bytes) '
        "and to the hand-rolled designs, which decode, preprocess and run the same export as the kit does."
    )

    def __init__(self, spec: ModelSpec):
        self.of_model(spec, {"pixels": "pixels", "workers": "classifier"})
        self.meta = export(spec, task_of(spec).exporter(spec))  # the export, made now if it is missing or stale
        self.model_note = (
            f"{spec.name} from {spec.path.name} (task {spec.task}: {spec.source}; {self.meta['height']}x"
            f"{self.meta['width']} pixels, {self.meta['num_labels']} labels)"
        )
        self.workers_note = f"The kit's count is `{self.workers}`'s instances (`{self.pixels}` runs one)."
        self.timed = ((self.pixels,), (self.workers,))
        self.time_note = f"`{self.pixels}` decodes and preprocesses, `{self.workers}` runs the graph."

    def label(self, models: dict) -> str:
        return f"instances={models[self.workers].get('instances', self.spec.instances)}"

    def setup(self, spec: dict, model_dir: Path, work: Path) -> dict[str, InputSet]:
        return {s["name"]: image_inputs(s) for s in spec["inputs"]}

    def limit(self, spec: dict, model_dir: Path, work: Path, inputs: dict[str, InputSet]) -> dict:
        """Images/s of decoding, preprocessing and the graph in this process, in batches of each size, in both layouts
        (perf.engine.limit.by_cores)."""
        lim = spec["limit"]
        images, passes = inputs[lim["input"]].items, lim.get("passes", LIMIT_PASSES)
        runs = [
            (layout, b, jobs)
            for b in lim["batch_sizes"]
            for layout, jobs in by_cores(functools.partial(limit_job, self.spec, b, passes), images)
        ]
        return measured("image", runs, passes * len(images)) | {"passes": passes}

    def accuracy(self, target, spec: dict, model_dir: Path, inputs: dict[str, InputSet]) -> dict:
        """Every label's served probability for the first images, each sent alone, against the same image decoded,
        preprocessed and run in this process (perf.baselines.image_model, as the hand-rolled designs run it)."""
        chosen = inputs[spec["sweep"]["input"]]
        count = min(spec["accuracy"].get("requests", 8), len(chosen.items))
        model = ImageModel(self.spec, CORES)
        pairs = [
            (answer.as_numpy("SCORES").reshape(-1), model.run({model.input: model.pixels(data)[np.newaxis]})[0].reshape(-1))
            for data, answer in zip(chosen.items[:count], served_answers(target, self.entry, chosen.tensors[:count]))
        ]
        reference = "the export's preprocessing and model.onnx on ONNX Runtime, in-process"
        return probabilities_check(pairs) | {"compared": "SCORES", "reference": reference}

    def sections(self, results: dict, out_dir: Path) -> list[str]:
        lim = results.get("limit")
        if not lim:
            return []
        note = (
            "Decoding, preprocessing and the graph in this process (perf.baselines.image_model, as the hand-rolled "
            f"designs run them), the input set's images {lim['passes']} times, the graph run on batches of each size.\n"
        )
        return limit_section(lim, "image", note)

    def inputs_line(self, spec: dict) -> str:
        aspects = ", ".join(f"{a}:{b}" for a, b in ASPECTS)
        return "; ".join(
            f"`{s['name']}`: {s['count']} generated pictures (smooth random patterns with a little noise, seed {s['seed']}), "
            f"the longer side {s['min_side']}-{s['max_side']} px, aspect ratios {aspects} and PNG / JPEG in turn"
            for s in spec["inputs"]
        )


def limit_job(spec: ModelSpec, batch: int, passes: int, images: list[bytes], threads: int):
    """The limit's work in one process: `images` decoded, preprocessed and classified `passes` times, in batches of
    `batch`."""
    model = ImageModel(spec, threads)
    parts = [images[start : start + batch] for start in range(0, len(images), batch)]
    return repeated(lambda part: model.run({model.input: np.stack([model.pixels(data) for data in part])}), parts, passes)
