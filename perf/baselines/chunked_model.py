"""A text-ranking or token-classification spec's model (kit.control.ranking_task, token_task) as the hand-rolled designs
load it: the spec's export, the kit's own pipeline (kit.pipelines.text.pairs: documents chunked beside their query;
kit.pipelines.text.entities: texts read in overlapping windows) with the settings of the kit variant measured beside
it (CHUNKED_SETTINGS: its pairs or tokens model's parameters, so the same length buckets and batch), and the graph that
variant serves (CHUNKED_GRAPH) in one ONNX Runtime session per process. The door's JSON body in, the door's answer out:
{"query", "documents"} -> {"documents": [{"index", "score", "chunks"}]}, or {"text"} -> {"entities", "chunks"}.

    MODEL_SPEC=models/reranker.toml CHUNKED_SETTINGS='{...}' CHUNKED_GRAPH=model.cpu.onnx python -m perf.baselines.flask_app

A request's items (its documents, or its text) are one row each: the batcher design runs many requests' rows as one
plan, their chunks or windows merged into the graph's batches as the kit's pairs or tokens model merges them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence

import numpy as np

from kit.adapters.artifacts import pair_pipeline, token_pipeline
from kit.adapters.settings import RankingSettings, TextsSettings
from kit.control.exports import export_dir
from kit.control.specs import ModelSpec
from kit.pipelines.errors import InputError
from kit.runners.onnx import make_session
from perf.baselines.tensor_model import OnePart

RANKING = "text-ranking"


def chunked_pipeline(spec: ModelSpec, parameters: dict[str, str]):
    """The spec's pipeline as a kit variant's pairs or tokens model (`parameters`) runs it, and what a group of it
    sends the graph."""
    folder = export_dir(spec)
    if spec.task == RANKING:
        pipeline, typed = pair_pipeline(folder, RankingSettings.from_parameters(parameters), spec.aggregation)
        return pipeline, lambda group: group.inputs(typed)
    pipeline = token_pipeline(folder, TextsSettings.from_parameters(parameters))
    return pipeline, lambda group: {"input_ids": group.input_ids, "attention_mask": group.attention_mask}


def results(pipeline, inputs: Callable, run: Callable, items: Sequence) -> list:
    """Each item's result (a document's score, a text's entities): planned together, each group through `run`."""
    plan = pipeline.plan_many(items)
    scores = pipeline.scores(plan)
    for number, group in enumerate(plan.groups):
        scores.add(number, run(inputs(group)))
    return [scores.result(index) for index in range(len(items))]


def door_answer(task: str, found: Sequence) -> dict:
    """The door's answer to one request's results."""
    if task == RANKING:
        return {"documents": [{"index": i, "score": r.score, "chunks": r.spans.tolist()} for i, r in enumerate(found)]}
    (text,) = found
    return {"entities": [vars(entity) for entity in text.entities], "chunks": text.spans.tolist()}


class ChunkedModel(OnePart):
    """The TensorModel interface (perf.baselines.tensor_model): `arrays` of a body, `run` on rows, `answer` of a
    request's outputs, so that every design of perf.baselines.flask_app, fastapi_app, fastapi_batcher serves it."""

    inputs_in_threads = False  # a body's texts are made into rows on the event loop; the tokenizer runs in `run`

    def __init__(self, spec: ModelSpec, threads: int):
        self.task = spec.task
        self.pipeline, self.inputs = chunked_pipeline(spec, json.loads(os.environ["CHUNKED_SETTINGS"]))
        self.session = make_session(export_dir(spec) / os.environ["CHUNKED_GRAPH"], threads)

    def arrays(self, body: object) -> dict[str, np.ndarray]:
        try:
            if self.task == RANKING:
                documents = list(body["documents"])
                return {
                    "QUERY": np.array([body["query"]] * len(documents), dtype=object),
                    "DOCUMENT": np.array(documents, dtype=object),
                }
            return {"TEXT": np.array([body["text"]], dtype=object)}
        except (KeyError, TypeError):
            raise InputError('the body is {"query", "documents"} for a cross-encoder, {"text"} for a token classifier') from None

    def run(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        items = list(zip(arrays["QUERY"], arrays["DOCUMENT"])) if self.task == RANKING else list(arrays["TEXT"])
        run = lambda feeds: self.session.run([self.pipeline.output], feeds)[0]  # noqa: E731
        found = np.empty(len(items), dtype=object)
        found[:] = results(self.pipeline, self.inputs, run, items)
        return [found]

    def answer(self, outputs: list[np.ndarray]) -> dict:
        return door_answer(self.task, outputs[0])
