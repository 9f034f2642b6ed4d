"""A spec's model (kit.control.specs) as the hand-rolled designs load it: its graph in one ONNX Runtime session per
process, the door's JSON body in ({"inputs": {tensor: nested arrays}}), its answer's JSON out. The tensors and
their types come from the config the kit derives from the same spec, so every design reads the same body.

    MODEL_SPEC=models/scorer.toml ORT_THREADS=2 python -m perf.baselines.flask_app --port 5000
"""

from __future__ import annotations

import numpy as np

from kit.control.configs import numpy_type
from kit.control.specs import ModelSpec
from kit.control.tasks import entry_config
from kit.pipelines.errors import InputError
from kit.runners.onnx import make_session


class OnePart:
    """A spec's model's `predict` and the batcher's `parts` (perf.baselines.fastapi_batcher) of its `arrays` of a body,
    `run` on rows and `answer` of a request's outputs: its request is one part, rows of one shape."""

    def parts(self, body: object):
        return [self.arrays(body)], lambda outputs: self.answer(outputs[0])

    def predict(self, body: object) -> dict:
        return self.answer(self.run(self.arrays(body)))


class TensorModel(OnePart):
    inputs_in_threads = False  # a body's few rows are made on the event loop

    def __init__(self, spec: ModelSpec, threads: int, session: bool = True):
        config = entry_config(spec)
        self.dtypes = {t.name: numpy_type(t.data_type) for t in config.input}
        self.outputs = [t.name for t in config.output]
        if session:
            self.session = make_session(spec.source_path, threads)

    def arrays(self, body: object) -> dict[str, np.ndarray]:
        """The body's inputs as arrays of the graph's types; InputError where one is missing or not rectangular."""
        inputs = body.get("inputs") if isinstance(body, dict) else None
        if not isinstance(inputs, dict) or set(inputs) != set(self.dtypes):
            raise InputError(f"the body must be {{'inputs': {{...}}}} with the inputs {sorted(self.dtypes)}")
        try:
            return {name: np.asarray(inputs[name], dtype=dtype) for name, dtype in self.dtypes.items()}
        except (ValueError, TypeError, OverflowError) as exc:
            raise InputError(f"an input is not a rectangular array of its type: {exc}") from None

    def run(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self.outputs, arrays)

    def answer(self, outputs: list[np.ndarray]) -> dict:
        return {"outputs": {name: value.tolist() for name, value in zip(self.outputs, outputs)}}
