"""Triton adapter for RADAR: each text is chunked and its length buckets go to the classifier as
BLS requests in flight together, so the dynamic batcher merges them with other texts' chunks."""

import asyncio

import numpy as np

from kit.adapters.artifacts import radar_pipeline
from kit.adapters.settings import RadarSettings
from kit.adapters.triton import answer, infer, input_array
from kit.pipelines.text.radar import decode_request_text


class TritonPythonModel:
    def initialize(self, args):
        self.settings, version_dir = RadarSettings.from_args(args)
        self.pipeline = radar_pipeline(version_dir, self.settings)
        # Version N of radar calls version N of its classifier, the graph exported with its tokenizer and golden
        # set: while a new version is checked (kit.control.deploy) the old one keeps calling the old graph.
        self.version = int(args["model_version"])

    async def classify(self, request):
        plan = self.pipeline.plan(decode_request_text(input_array(request, "TEXT"), self.settings.max_text_bytes))
        # The text's trace goes with its chunks, so Triton's request traces show the classifier's queue and compute.
        trace = request.trace()
        inputs = [{"input_ids": group.input_ids, "attention_mask": group.attention_mask} for group in plan.groups]
        logits = await asyncio.gather(*(infer(self.settings.classifier, i, ["logits"], trace, self.version) for i in inputs))
        result = self.pipeline.finish(plan, [value for (value,) in logits])
        return {
            "SCORE": np.array([result.score], dtype=np.float32),
            "CHUNK_SCORES": result.chunk_scores,
            "CHUNK_SPANS": result.spans,
        }

    async def execute(self, requests):
        return [await answer(self.classify, request, "radar") for request in requests]
