"""A `pipeline` spec's model (kit.control.pipeline_task) as the hand-rolled designs load it: the user's module run in
this process (kit.pipelines.custom), its networks in ONNX Runtime sessions of this process, on the door's tensor body
({"inputs": {tensor: nested arrays}}, strings for BYTES). The same module and graphs as the kit serves, so the only
difference between the designs is how they serve it.

    MODEL_SPEC=models/tabular.toml ORT_THREADS=2 python -m perf.baselines.flask_app --port 5000
"""

from __future__ import annotations

import asyncio

import numpy as np

from door.routes import json_values
from kit.adapters.custom_pipeline import in_process_networks
from kit.control.specs import ModelSpec
from kit.pipelines.custom import answer
from perf.baselines.planned import entry_pipeline
from perf.baselines.tensor_model import TensorModel


def as_bytes(array: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda text: str(text).encode("utf-8"), otypes=[np.object_])(array)


class PipelineModel(TensorModel):
    """TensorModel's body, the door's JSON of an answer (door.routes.json_values), and the pipeline's `run` in place
    of one graph (a thread's own event loop per call: each design calls `run` from a worker thread)."""

    def __init__(self, spec: ModelSpec, threads: int):
        super().__init__(spec, threads, session=False)
        self.pipeline = entry_pipeline(spec)
        self.networks = in_process_networks(self.pipeline, spec.source_path.parent, spec.max_batch_size, threads)
        self.batched = spec.max_batch_size > 0  # unbatched: a request's tensors whole, with no rows axis

    def arrays(self, body: object) -> dict[str, np.ndarray]:
        arrays = super().arrays(body)
        return {k: as_bytes(v) if v.dtype == np.object_ else v for k, v in arrays.items()}

    def run(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        outputs = asyncio.run(answer(self.pipeline, arrays, self.networks, self.batched))
        return [outputs[name] for name in self.outputs]

    def answer(self, outputs: list[np.ndarray]) -> dict:
        return {"outputs": {name: json_values(value) for name, value in zip(self.outputs, outputs)}}
