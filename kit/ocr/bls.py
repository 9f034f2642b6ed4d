"""The OCR pipeline's model calls as Triton BLS requests (only importable inside a Python-backend stub).

`pb_utils` is passed in rather than imported so that this module stays importable, and readable,
outside the stub.
"""

from __future__ import annotations

import numpy as np


class ModelCallError(RuntimeError):
    """A BLS request failed; the message names the model."""


async def infer(pb_utils, model: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> list[np.ndarray]:
    request = pb_utils.InferenceRequest(
        model_name=model,
        inputs=[pb_utils.Tensor(name, value) for name, value in inputs.items()],
        requested_output_names=outputs,
    )
    response = await request.async_exec()
    if response.has_error():
        raise ModelCallError(f"{model}: {response.error().message()}")
    return [pb_utils.get_output_tensor_by_name(response, name).as_numpy() for name in outputs]


class BlsEngines:
    """`kit.ocr.pipeline.Engines` over the ocr_det / ocr_cls / ocr_rec models of this server."""

    def __init__(self, pb_utils, det: str = "ocr_det", cls: str = "ocr_cls", rec: str = "ocr_rec"):
        self.pb_utils, self.det, self.cls, self.rec = pb_utils, det, cls, rec

    async def detect(self, images: np.ndarray) -> np.ndarray:
        return (await infer(self.pb_utils, self.det, {"image": images}, ["prob_map"]))[0]

    async def classify(self, crops: np.ndarray) -> np.ndarray:
        return (await infer(self.pb_utils, self.cls, {"image": crops}, ["probs"]))[0]

    async def recognize(self, crops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        indices, probs = await infer(self.pb_utils, self.rec, {"image": crops}, ["char_indices", "char_probs"])
        return indices, probs
