"""Triton adapter for OCR: decode one image, run kit.ocr's pipeline with the networks as BLS calls."""


import numpy as np
import triton_python_backend_utils as pb_utils

from kit.backends.adapter import model_settings
from kit.ocr.bls import BlsEngines, ModelCallError
from kit.ocr.image import ImageError, decode_request_image
from kit.ocr.pipeline import OcrPipeline, OcrSettings


def error_response(message, code):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code))


class TritonPythonModel:
    def initialize(self, args):
        _, params, version_dir = model_settings(args)
        self.max_pixels = int(params["max_pixels"])
        self.max_bytes = int(params["max_image_bytes"])
        self.engines = BlsEngines(pb_utils, params["det_model"], params["cls_model"], params["rec_model"])
        self.pipeline = OcrPipeline.from_files(version_dir / "characters.txt", OcrSettings.from_parameters(params))

    async def respond(self, request):
        raw = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
        try:
            image = decode_request_image(raw, self.max_pixels, self.max_bytes)
        except ImageError as exc:
            return error_response(str(exc), pb_utils.TritonError.INVALID_ARG)
        try:
            result = await self.pipeline.read(image, self.engines)
        except ModelCallError as exc:
            return error_response(f"ocr failed: {exc}", pb_utils.TritonError.UNAVAILABLE)
        return pb_utils.InferenceResponse(
            [
                pb_utils.Tensor("TEXTS", np.array([t.encode("utf-8") for t in result.texts], dtype=np.object_)),
                pb_utils.Tensor("SCORES", result.scores),
                pb_utils.Tensor("BOXES", result.boxes),
            ]
        )

    async def execute(self, requests):
        return [await self.respond(request) for request in requests]
