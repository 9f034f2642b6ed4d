"""A spec's model (kit.control.specs) as the hand-rolled designs load it, by its task: an `onnx` spec's graph on the
door's tensor body (perf.baselines.tensor_model), an image classifier's export on the door's image body
(perf.baselines.image_model), one of pixels on the door's pixels body (perf.baselines.pixels_model), a user's pipeline
module on the tensor body (perf.baselines.pipeline_model), a cross-encoder's or token classifier's export on the door's
body (perf.baselines.chunked_model). Each has
`arrays` of a body, `run` on rows, `answer` of a row's outputs and `predict`, so that one Flask, one FastAPI and one
batcher design (perf.baselines.flask_app, fastapi_app, fastapi_batcher) serve any of them.

    MODEL_SPEC=models/scorer.toml ORT_THREADS=2 python -m perf.baselines.flask_app --port 5000
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kit.control.configs import ARTIFACTS, SOURCE
from kit.control.specs import read_spec
from perf.baselines.chunked_model import ChunkedModel
from perf.baselines.image_model import ImageModel
from perf.baselines.pipeline_model import PipelineModel
from perf.baselines.pixels_model import PixelsModel
from perf.baselines.tensor_model import TensorModel

MODELS = {
    "onnx": TensorModel,
    "image-classification": ImageModel,
    "pipeline": PipelineModel,
    "text-ranking": ChunkedModel,
    "token-classification": ChunkedModel,
}


def from_env() -> TensorModel | ImageModel | PixelsModel | PipelineModel | ChunkedModel:
    path = Path(os.environ["MODEL_SPEC"]).resolve()
    spec = read_spec(path, artifacts=ARTIFACTS if path.parent == SOURCE.resolve() else None)  # the kit's own (resnet50)
    kind = PixelsModel if spec.input == "pixels" else MODELS[spec.task]
    model = kind(spec, int(os.environ.get("ORT_THREADS", "1")))
    # The perf kit counts these lines to know that every worker process has loaded its model.
    print(f"{spec.task} model ready in pid {os.getpid()}", file=sys.stderr, flush=True)
    return model
