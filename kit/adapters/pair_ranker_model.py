"""Triton adapter for a text-ranking spec's pairs (`NAME_pairs`, kit.control.ranking_task), installed as its model.py by
the repository builder. A batch of query-document pairs (from the entry ensemble, many clients') is planned at once:
each document chunked to fit beside its query, the chunk pairs tokenized and merged across requests into classifier
requests by length bucket, all in flight together (kit.pipelines.text.pairs). Each pair is answered as soon as the last
request holding one of its chunks has: SCORE (the document's relevance, its chunks' best or mean), CHUNK_SCORES,
CHUNK_SPANS (offsets into the document) and TOKENS. The hand-off and the window of chunks in flight are a texts
model's (kit.adapters.grouped_calls)."""

import numpy as np

from kit.adapters.artifacts import pair_pipeline
from kit.adapters.grouped_calls import GroupedModel
from kit.adapters.settings import RankingSettings
from kit.adapters.triton import input_array
from kit.pipelines.text.pipeline import Result, decode_request_text


class TritonPythonModel(GroupedModel):
    settings_type = RankingSettings
    text_input = "DOCUMENT"

    def load(self, args, version_dir) -> None:
        self.pipeline, self.typed = pair_pipeline(version_dir, self.settings, self.settings.aggregation)

    def check(self, request) -> list[tuple[str, str]]:
        """The request's query and document (one pair); a query that leaves the document no room fails here, alone."""
        limit = self.settings.max_text_bytes
        query = decode_request_text(input_array(request, "QUERY"), limit, "QUERY")
        document = decode_request_text(input_array(request, "DOCUMENT"), limit, "DOCUMENT")
        self.pipeline.room(query)
        return [(query, document)]

    def inputs(self, group) -> dict[str, np.ndarray]:
        return group.inputs(self.typed)

    @staticmethod
    def outputs(results: list[Result]) -> dict[str, np.ndarray]:
        (result,) = results
        return {
            "SCORE": np.array([result.score], dtype=np.float32),
            "CHUNK_SCORES": result.chunk_scores,
            "CHUNK_SPANS": result.spans,
            "TOKENS": np.array([result.tokens], dtype=np.int32),
        }
