"""A text-ranking or token-classification spec's model (docs/MODELS.md) as a workload: `python -m perf sweep --model
NAME` measures it the way the text models are measured, with nothing written for it.

A request is one document beside a query (a cross-encoder's: the same few queries in turn) or one text (a token
classifier's), the same for every design: the kit over gRPC (the `NAME` ensemble, its pairs or tokens model merging
many requests' chunks or windows into the graph's batches), the kit through the door's route, and the hand-rolled
designs (perf.baselines.chunked_model: Flask per request, FastAPI + uvicorn per request, FastAPI with an asyncio
batcher) running the kit's own pipeline with the kit variant's length buckets and batch on the graph it serves. The
limit is that same work in this process, the input set's items planned together in batches of each size; the accuracy
check compares the served answers with it on the graph as exported (model.onnx): a document's score, or a text's
entities (their types, words and offsets must be equal, their scores are the figure).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from kit.control.exports import export_dir
from kit.control.specs import ModelSpec
from kit.pipelines.text.entities import Entities
from kit.runners.onnx import make_session
from perf.baselines.chunked_model import RANKING, chunked_pipeline, results
from perf.engine.inputs import InputSet
from perf.engine.limit import CORES, repeated
from perf.engine.load import served_answers
from perf.engine.targets import variant_models
from perf.workloads.tensor import LIMIT_PASSES, TensorModelWorkload
from samples.texts import sample_texts

QUERIES = ["When does the committee meet?", "What do detectors learn from?", "Which results are state of the art?"]
PARTS = {RANKING: "pairs", "token-classification": "tokens"}  # each task's middle model, by its part


class ChunkedModelWorkload(TensorModelWorkload):
    """The workload of one text-ranking or token-classification spec's model."""

    sweep_spec = "model-chunked"  # perf/specs/model-chunked.json
    needs = ("export.json", "tokenizer.json")
    limit_batches = "planned together in batches of each size, their chunks or windows merged into the graph's batches"

    def __init__(self, spec: ModelSpec):
        self.of_model(spec, {"texts": PARTS[spec.task], "workers": "classifier"})
        self.ranking = spec.task == RANKING
        self.request = self.item = "document" if self.ranking else "text"
        self.limit_subject = f"The kit's pipeline and the graph ({self.texts}'s work and {self.workers}'s)"
        body = '`{"query", "documents": [one]}`' if self.ranking else '`{"text"}`'
        self.load_note = (
            f"a {self.request} per request: its tensors to the kit over gRPC, {body} to the door and the hand-rolled "
            "designs, which run the kit's pipeline with the same length buckets and batch on the same graph."
        )

    def label(self, models: dict) -> str:
        classifier, texts = models[self.workers], models.get(self.texts, {})
        return f"{classifier.get('instances', 1)}x{classifier.get('threads', 1)} {self.texts}={texts.get('instances', 1)}"

    def served(self, work: Path, setting: dict | None = None) -> tuple[dict[str, str], str]:
        """The parameters of the kit variant's pairs or tokens model, and the graph file its classifier serves."""
        models = variant_models(self, setting or {}, self.folder, work)
        classifier = models[self.workers].settings
        return models[self.texts].settings.to_parameters(), getattr(classifier, "onnx_model", "model.onnx")

    def setup(self, spec: dict, model_dir: Path, work: Path) -> dict[str, InputSet]:
        sets = {}
        for s in spec["inputs"]:
            texts = sample_texts(s["count"], s["min_chars"], s["max_chars"], seed=s["seed"])
            if self.ranking:
                items = [(QUERIES[i % len(QUERIES)], text) for i, text in enumerate(texts)]
                tensors = [{"QUERY": as_bytes(query), "DOCUMENT": as_bytes(text)} for query, text in items]
                bodies = [{"query": query, "documents": [text]} for query, text in items]
            else:
                items, tensors, bodies = texts, [{"TEXT": as_bytes(text)} for text in texts], [{"text": t} for t in texts]
            encoded = [json.dumps(body).encode("utf-8") for body in bodies]
            sets[s["name"]] = InputSet(s["name"], items, 1.0, tensors=tensors, bodies=encoded)
        return sets

    def baseline_environment(self, family: str, setting: dict, model_dir: Path, work: Path) -> dict[str, str]:
        parameters, graph = self.served(work / "kit-settings")
        env = super().baseline_environment(family, setting, model_dir, work)
        return env | {"CHUNKED_SETTINGS": json.dumps(parameters), "CHUNKED_GRAPH": graph}

    def limit_layout(self) -> str:
        return f"the pipeline, ONNX Runtime {CORES} threads"

    def limit(self, spec: dict, model_dir: Path, work: Path, inputs: dict[str, InputSet]) -> dict:
        self.parameters, self.graph = self.served(work / "kit-settings")
        return super().limit(spec, model_dir, work, inputs)

    def limit_job(self, items: list, batch: int):
        return functools.partial(limit_job, self.spec, self.parameters, self.graph, items, batch)

    def accuracy(self, target, spec: dict, model_dir: Path, inputs: dict[str, InputSet]) -> dict:
        """The first requests' served answers against the kit's pipeline in this process on model.onnx: a document's
        score, or a text's entities (types, words and offsets equal, else the figure is infinite; scores the figure)."""
        chosen = inputs[spec["sweep"]["input"]]
        count = min(spec["accuracy"].get("requests", 8), len(chosen.items))
        parameters, _ = self.served(target.workdir / "accuracy")
        pipeline, feeds = chunked_pipeline(self.spec, parameters)
        session = make_session(self.folder / "model.onnx", CORES)
        run = lambda arrays: session.run([pipeline.output], arrays)[0]  # noqa: E731
        wanted = results(pipeline, feeds, run, chosen.items[:count])
        answers = served_answers(target, self.entry, chosen.tensors[:count])
        worst = max((difference(answer, want) for answer, want in zip(answers, wanted)), default=0.0)
        compared = "SCORE" if self.ranking else "ENTITY_LABELS, ENTITY_WORDS and ENTITY_SPANS equal, ENTITY_SCORES"
        reference = "the kit's pipeline on model.onnx in ONNX Runtime, in-process"
        return {"requests": count, "max_abs_diff": worst, "reference": reference, "compared": compared}

    def inputs_line(self, spec: dict) -> str:
        what = f"documents, each beside one of {len(QUERIES)} queries in turn" if self.ranking else "texts"
        return "; ".join(
            f"`{s['name']}`: {s['count']} {what} of {s['min_chars']}-{s['max_chars']} characters (samples.texts, "
            f"seed {s['seed']})"
            for s in spec["inputs"]
        )


def as_bytes(text: str) -> np.ndarray:
    return np.array([text.encode("utf-8")], dtype=np.object_)


def difference(answer, want) -> float:
    """How far a served answer is from the reference's: a score's difference; for entities, that of their scores,
    or infinity where their types, words or offsets differ."""
    if not isinstance(want, Entities):
        return abs(float(answer.as_numpy("SCORE").reshape(-1)[0]) - want.score)
    labels, words = answer.as_numpy("ENTITY_LABELS").reshape(-1), answer.as_numpy("ENTITY_WORDS").reshape(-1)
    spans = answer.as_numpy("ENTITY_SPANS").reshape(-1, 2).tolist()
    served = [(label.decode(), word.decode(), *span) for label, word, span in zip(labels, words, spans)]
    if served != [(e.label, e.word, e.start, e.end) for e in want.entities]:
        return float("inf")
    scores = answer.as_numpy("ENTITY_SCORES").reshape(-1)
    return float(np.abs(scores - [e.score for e in want.entities]).max(initial=0.0))


def limit_job(spec: ModelSpec, parameters: dict[str, str], graph: str, items: list, batch: int):
    """The limit's work: the items `batch` at a time through the kit's pipeline and the graph, LIMIT_PASSES times."""
    pipeline, feeds = chunked_pipeline(spec, parameters)
    session = make_session(export_dir(spec) / graph, CORES)
    run = lambda arrays: session.run([pipeline.output], arrays)[0]  # noqa: E731
    batches = [items[start : start + batch] for start in range(0, len(items), batch)]
    return repeated(functools.partial(results, pipeline, feeds, run), batches, LIMIT_PASSES)
