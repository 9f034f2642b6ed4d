"""Triton adapter for RADAR: each text is chunked and its length buckets go to the classifier as
BLS requests in flight together, so the dynamic batcher merges them with other texts' chunks."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

from kit.backends.adapter import model_settings
from kit.text.radar import InputError, RadarPipeline, decode_text


def error_response(message, code):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code))


class TritonPythonModel:
    def initialize(self, args):
        _, params, version_dir = model_settings(args)
        self.classifier = params["classifier"]
        self.max_text_bytes = int(params["max_text_bytes"])
        self.pipeline = RadarPipeline.from_files(
            version_dir, buckets=[int(b) for b in params["buckets"].split(",")], max_chars=int(params["max_chars"])
        )

    async def classify(self, group, trace):
        # The text's trace goes with its chunks, so Triton's request traces show the classifier's queue and compute.
        request = pb_utils.InferenceRequest(
            model_name=self.classifier,
            inputs=[pb_utils.Tensor("input_ids", group.input_ids), pb_utils.Tensor("attention_mask", group.attention_mask)],
            requested_output_names=["logits"],
            trace=trace,
        )
        response = await request.async_exec()
        if response.has_error():
            raise RuntimeError(response.error().message())
        return pb_utils.get_output_tensor_by_name(response, "logits").as_numpy()

    async def respond(self, request):
        try:
            raw = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            if raw.size != 1:
                raise InputError(f"TEXT must hold exactly one text, got {raw.size}")
            plan = self.pipeline.plan(decode_text(bytes(raw[0]), self.max_text_bytes))
        except InputError as exc:
            return error_response(str(exc), pb_utils.TritonError.INVALID_ARG)
        try:
            trace = request.trace()
            logits = await asyncio.gather(*(self.classify(group, trace) for group in plan.groups))
        except RuntimeError as exc:
            return error_response(f"{self.classifier} failed: {exc}", pb_utils.TritonError.UNAVAILABLE)
        result = self.pipeline.finish(plan, logits)
        return pb_utils.InferenceResponse(
            [
                pb_utils.Tensor("SCORE", np.array([result.score], dtype=np.float32)),
                pb_utils.Tensor("CHUNK_SCORES", result.chunk_scores),
                pb_utils.Tensor("CHUNK_SPANS", result.spans),
            ]
        )

    async def execute(self, requests):
        return [await self.respond(request) for request in requests]
