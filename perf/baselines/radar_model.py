"""RADAR as the hand-rolled services run it: the kit's chunking, length buckets and ONNX model in-process.

Every baseline imports this, so the work per request is the kit's (same chunks, same padding); only
the serving design differs. Configured from the environment, as such services usually are:
RADAR_MODEL_DIR (export folder), ORT_THREADS (ONNX Runtime intra-op threads), RADAR_BUCKET_COUNT.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from kit.onnx_runner import make_session
from kit.text.radar import DEFAULT_BUCKET_COUNT, Plan, RadarPipeline, bucket_parameters, decode_text

MAX_TEXT_BYTES = 1 << 20


class RadarModel:
    def __init__(self, model_dir: Path, threads: int, bucket_count: int = DEFAULT_BUCKET_COUNT):
        buckets = bucket_parameters(model_dir, count=bucket_count)["buckets"]
        self.pipeline = RadarPipeline.from_files(model_dir, buckets=[int(b) for b in buckets.split(",")])
        self.session = make_session(model_dir / "model.onnx", threads)

    def plan(self, text: str) -> Plan:
        """Raises kit.text.radar.InputError for a text the kit would reject."""
        return self.pipeline.plan(decode_text(text.encode("utf-8"), MAX_TEXT_BYTES))

    def logits(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        return self.session.run(["logits"], {"input_ids": input_ids, "attention_mask": attention_mask})[0]

    def respond(self, plan: Plan, logits: list[np.ndarray]) -> dict:
        result = self.pipeline.finish(plan, logits)
        return {"score": result.score, "chunk_scores": result.chunk_scores.tolist(), "chunk_spans": result.spans.tolist()}

    def classify(self, text: str) -> dict:
        """One request's chunks, one session run per length bucket: no batching across requests."""
        plan = self.plan(text)
        return self.respond(plan, [self.logits(g.input_ids, g.attention_mask) for g in plan.groups])


def from_env() -> RadarModel:
    model = RadarModel(
        Path(os.environ.get("RADAR_MODEL_DIR", "artifacts/radar")),
        threads=int(os.environ.get("ORT_THREADS", "1")),
        bucket_count=int(os.environ.get("RADAR_BUCKET_COUNT", DEFAULT_BUCKET_COUNT)),
    )
    # The perf kit counts these lines to know that every worker process has loaded its model.
    print(f"radar model ready in pid {os.getpid()}", file=sys.stderr, flush=True)
    return model
