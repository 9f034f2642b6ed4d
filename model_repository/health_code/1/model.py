"""Triton adapter for health codes: texts from `ocr` (BLS) while the QR code is read here, then JSON."""

import asyncio
import json

import numpy as np
import triton_python_backend_utils as pb_utils

from kit.backends.adapter import model_settings
from kit.ocr.bls import ModelCallError, infer
from kit.ocr.health_code import find_qr, read_health_code
from kit.ocr.image import ImageError, decode_request_image


def error_response(message, code):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code))


class TritonPythonModel:
    def initialize(self, args):
        _, params, _ = model_settings(args)
        self.ocr_model = params["ocr_model"]
        self.max_pixels = int(params["max_pixels"])
        self.max_bytes = int(params["max_image_bytes"])

    async def respond(self, request):
        raw = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
        try:
            image = decode_request_image(raw, self.max_pixels, self.max_bytes)
        except ImageError as exc:
            return error_response(str(exc), pb_utils.TritonError.INVALID_ARG)
        # The QR detector releases the GIL: it runs in a thread while `ocr` works on the same image.
        qr_future = asyncio.get_running_loop().run_in_executor(None, find_qr, image)
        try:
            (texts,), qr = await asyncio.gather(infer(pb_utils, self.ocr_model, {"IMAGE": raw}, ["TEXTS"]), qr_future)
        except ModelCallError as exc:
            return error_response(f"health_code failed: {exc}", pb_utils.TritonError.UNAVAILABLE)
        result = read_health_code(image, qr, [t.decode("utf-8") for t in texts.reshape(-1)])
        payload = json.dumps(result, ensure_ascii=False).encode("utf-8")
        return pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array([payload], dtype=np.object_))])

    async def execute(self, requests):
        return [await self.respond(request) for request in requests]
