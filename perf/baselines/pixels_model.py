"""An image classifier of pixels (an image-classification spec with `input = "pixels"`, kit.control.image_task) as
the hand-rolled designs load it: the spec's padded graph in one ONNX Runtime session per process, each image run at
its own size (no padding: the hand-rolled batcher merges equal shapes only, as Triton's batcher would without the
kit's merge). The door's JSON body in ({"shape": [3, h, w], "data": "<base64 float32>"}), the door's answer out
({"probs", "top"}, door.routes.classes_result).

    MODEL_SPEC=models/shapes.toml ORT_THREADS=2 python -m perf.baselines.flask_app --port 5000
"""

from __future__ import annotations

import numpy as np

from door.problems import Problem
from door.routes import base64_data, classes_result, float32_array
from kit.control.exports import export, export_dir
from kit.control.specs import ModelSpec
from kit.control.tasks import task_of
from kit.pipelines.errors import InputError
from kit.pipelines.images import check_images
from kit.runners.onnx import make_session
from perf.baselines.tensor_model import OnePart


def graph_inputs(image: np.ndarray) -> dict[str, np.ndarray]:
    """The padded graph's inputs for one unpadded image [1, 3, H, W]: the image and its size."""
    return {"pixel_values": image, "image_sizes": np.array([image.shape[2:]], dtype=np.int64)}


class PixelsModel(OnePart):
    """The TensorModel interface (perf.baselines.tensor_model): `arrays` of a body, `run` on rows, `answer` of a row's
    outputs, so that every design of perf.baselines.flask_app, fastapi_app, fastapi_batcher serves it."""

    inputs_in_threads = False  # a body is one base64 decode

    def __init__(self, spec: ModelSpec, threads: int):
        if not spec.shipped:
            export(spec, task_of(spec).exporter(spec))  # exported again only if the checkpoint changed
        self.max_pixels = spec.max_image_pixels
        self.session = make_session(export_dir(spec) / "model.onnx", threads)

    def arrays(self, body: object) -> dict[str, np.ndarray]:
        """The body's image as the graph's one-row inputs; InputError where it is not a valid image."""
        shape, data = (body.get("shape"), body.get("data")) if isinstance(body, dict) else (None, None)
        sized = isinstance(shape, list) and len(shape) == 3 and all(isinstance(d, int) and d >= 0 for d in shape)
        if not sized or not isinstance(data, str):
            raise InputError('the body must be {"shape": [3, height, width], "data": "<base64 of float32 values>"}')
        try:
            image = float32_array(base64_data(data), tuple(shape))[np.newaxis]  # as the door decodes it
        except Problem as exc:
            raise InputError(exc.detail) from None
        check_images(image, self.max_pixels)
        return graph_inputs(image)

    def run(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(["probs"], arrays)

    def answer(self, outputs: list[np.ndarray]) -> dict:
        return classes_result(outputs[0].reshape(-1))
