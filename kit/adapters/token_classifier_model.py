"""Triton adapter for a token-classification spec's tokens model (`NAME_tokens`, kit.control.token_task), installed as
its model.py by the repository builder. A batch of texts (from the entry ensemble, many clients') is read in windows
of the model's token limit that overlap, the windows of every text merged into classifier requests by length bucket
(kit.pipelines.text.entities); each text is answered as soon as its own windows are: ENTITY_LABELS, ENTITY_SCORES,
ENTITY_SPANS (character offsets into the text), ENTITY_WORDS, CHUNK_SPANS (the windows') and TOKENS. The hand-off and
the window of work in flight are a texts model's (kit.adapters.grouped_calls)."""

import numpy as np

from kit.adapters.artifacts import token_pipeline
from kit.adapters.grouped_calls import GroupedModel
from kit.adapters.triton import input_array
from kit.pipelines.text.entities import Entities
from kit.pipelines.text.pipeline import decode_request_text


class TritonPythonModel(GroupedModel):
    def load(self, args, version_dir) -> None:
        self.pipeline = token_pipeline(version_dir, self.settings)

    def check(self, request) -> list[str]:
        return [decode_request_text(input_array(request, "TEXT"), self.settings.max_text_bytes)]

    @staticmethod
    def outputs(results: list[Entities]) -> dict[str, np.ndarray]:
        (result,) = results
        found = result.entities
        return {
            "ENTITY_LABELS": np.array([entity.label.encode("utf-8") for entity in found], dtype=np.object_),
            "ENTITY_SCORES": np.array([entity.score for entity in found], dtype=np.float32),
            "ENTITY_SPANS": np.array([[entity.start, entity.end] for entity in found], dtype=np.int32).reshape(-1, 2),
            "ENTITY_WORDS": np.array([entity.word.encode("utf-8") for entity in found], dtype=np.object_),
            "CHUNK_SPANS": result.spans,
            "TOKENS": np.array([result.tokens], dtype=np.int32),
        }
