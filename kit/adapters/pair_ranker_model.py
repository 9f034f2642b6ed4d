"""Triton adapter for a text-ranking spec's pairs (`NAME_pairs`, kit.control.ranking_task), installed as its model.py by
the repository builder. A batch of query-document pairs (from the entry ensemble, many clients') is planned at once:
each document chunked to fit beside its query, the chunk pairs tokenized and merged across requests into classifier
requests by length bucket, all in flight together (kit.pipelines.text.pairs). Each pair is answered as soon as the last
request holding one of its chunks has: SCORE (the document's relevance, its chunks' best or mean), CHUNK_SCORES,
CHUNK_SPANS (offsets into the document) and TOKENS.

As a text model's texts model does (kit/adapters/text_classifier_model.py), `execute` hands the batch to a loop of its
own and returns once its chunks fit the window of chunks in flight (kit.adapters.grouped_calls)."""

import numpy as np

from kit.adapters.artifacts import pair_pipeline
from kit.adapters.grouped_calls import Carried, answer_groups, hand_off
from kit.adapters.handoff import Background, Window
from kit.adapters.settings import RankingSettings
from kit.adapters.triton import Replies, infer, input_array
from kit.pipelines.text.pipeline import Result, decode_request_text

DRAIN_S = 60.0  # at unload, how long the pairs in flight may take to be answered


class TritonPythonModel:
    def initialize(self, args):
        self.settings, version_dir = RankingSettings.from_args(args)
        self.name = args["model_name"]
        self.entry = self.settings.parameters_from or self.name  # the model its clients call, which errors name
        self.pipeline, self.typed = pair_pipeline(version_dir, self.settings, self.settings.aggregation)
        self.version = int(args["model_version"])  # version N calls its classifier's version N (kit.server.deploy)
        self.window = Window(self.settings.chunks_in_flight)
        self.background = Background(f"{self.name}-{args['model_instance_name']}", self.settings.call_threads or None)

    def pair(self, request) -> list[tuple[str, str]]:
        """The request's query and document (one pair); a query that leaves the document no room fails here, alone."""
        limit = self.settings.max_text_bytes
        query = decode_request_text(input_array(request, "QUERY"), limit, "QUERY")
        document = decode_request_text(input_array(request, "DOCUMENT"), limit, "DOCUMENT")
        self.pipeline.room(query)
        return [(query, document)]

    @staticmethod
    def outputs(results: list[Result]) -> dict[str, np.ndarray]:
        (result,) = results
        return {
            "SCORE": np.array([result.score], dtype=np.float32),
            "CHUNK_SCORES": result.chunk_scores,
            "CHUNK_SPANS": result.spans,
            "TOKENS": np.array([result.tokens], dtype=np.int32),
        }

    async def rank(self, replies: Replies, carried: Carried, plan, held: int, trace) -> None:
        async def call(group):
            inputs = group.inputs(self.typed)
            (logits,) = await infer(self.settings.classifier, inputs, [self.pipeline.output], trace, self.version)
            return logits

        await answer_groups(replies, carried, plan, self.pipeline.scores(plan), call, self.outputs, self.window, held)

    def execute(self, requests):
        hand_off(requests, self.entry, self.pair, self.pipeline.plan_many, self.window, self.background_rank)

    def background_rank(self, *work) -> None:
        self.background.submit(self.rank(*work))

    def finalize(self):
        self.window.drain(DRAIN_S)
        self.background.stop()
