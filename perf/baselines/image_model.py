"""An image-classification spec's model (kit.control.image_task) as the hand-rolled designs load it: the spec's export
(artifacts/models/NAME), each image decoded with the kit's limits and preprocessed by the same
kit.pipelines.image_processing.Preprocessing as `NAME_pixels`, the graph in one ONNX Runtime session per process.
The door's JSON body in ({"image": "<base64>"}, what the door takes), the door's answer out ({"label", "scores"}).

    MODEL_SPEC=models/pets.toml ORT_THREADS=2 python -m perf.baselines.flask_app --port 5000
"""

from __future__ import annotations

import json

import numpy as np

from kit.control.specs import ModelSpec
from kit.pipelines.encoded_images import decode_base64
from kit.pipelines.errors import InputError
from kit.pipelines.image_processing import Preprocessing, decode_image
from kit.runners.onnx import make_session
from perf.baselines.planned import planned
from perf.baselines.tensor_model import OnePart


class ImageModel(OnePart):
    """The TensorModel interface (perf.baselines.tensor_model): `arrays` of a body, `run` on rows, `answer` of a row's
    outputs, so that every design of perf.baselines.flask_app, fastapi_app, fastapi_batcher serves either."""

    inputs_in_threads = True  # an image's decoding and preprocessing run in FastAPI's thread pool, off the event loop

    def __init__(self, spec: ModelSpec, threads: int):
        models = planned(spec)  # the export, made again only if the checkpoint changed
        entry, pixels, graph = models["entry"].settings, models["pixels"], models["classifier"]
        self.labels, self.max_bytes, self.max_pixels = json.loads(entry.labels), entry.max_image_bytes, entry.max_pixels
        (self.input,), (self.output,) = [t.name for t in graph.config.input], [t.name for t in graph.config.output]
        self.preprocess = Preprocessing.load(pixels.files[pixels.settings.preprocessing])
        self.session = make_session(graph.files["model.onnx"], threads)

    def pixels(self, raw: bytes) -> np.ndarray:
        """One encoded image as the graph's [3, height, width], as `NAME_pixels` makes it."""
        return self.preprocess(decode_image(raw, self.max_bytes, self.max_pixels))

    def arrays(self, body: object) -> dict[str, np.ndarray]:
        """The body's image as the graph's one-row input; InputError where it is not an image in base64."""
        image = body.get("image") if isinstance(body, dict) else None
        if not isinstance(image, str):
            raise InputError('the body must be {"image": "<base64 of a PNG, JPEG, BMP or WebP file>"}')
        return {self.input: self.pixels(decode_base64(image.encode("ascii", "replace")))[np.newaxis]}

    def run(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        """SCORES [rows, labels] of preprocessed rows [rows, 3, height, width]."""
        return self.session.run([self.output], arrays)

    def answer(self, outputs: list[np.ndarray]) -> dict:
        """One image's answer, as the door gives it: the most probable label and every label's probability."""
        scores = outputs[0].reshape(-1)
        return {"label": self.labels[int(scores.argmax())], "scores": dict(zip(self.labels, scores.tolist()))}
