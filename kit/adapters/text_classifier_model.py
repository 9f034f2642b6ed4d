"""Triton adapter for a text classifier's texts (RADAR's `radar_texts`, and the `<name>_texts` of every
text-classification spec, kit.control.text_task), installed as their model.py by the repository builder. A batch
of texts (from the entry ensemble, many clients') is chunked and tokenized at once, and its chunks go to the
classifier as BLS requests merged across texts, one per length bucket and classifier batch, all in flight
together; each text is answered as soon as the last request holding one of its chunks has
(kit.pipelines.text.pipeline.BatchScores), so a short text does not wait for a long one.

Its config's outputs say what a text's answer holds: `SCORE` and `CHUNK_SCORES` [-1], one label's probability
(RADAR's AI-generated label), `SCORES` [labels] and `CHUNK_SCORES` [-1, labels], every label's, or `EMBEDDING`
[dimensions] and `CHUNK_EMBEDDINGS` [-1, dimensions], an encoder's (a feature-extraction spec's); and `TOKENS` [1], the
tokens its chunks took.

`execute` hands the batch to a loop of its own and returns once its chunks fit the window of chunks in flight
(kit.adapters.handoff), so the instance takes its next batch while this one's answers are on their way: how many
texts are in flight follows from what the classifier takes (`chunks_in_flight`), not from instances x batch."""

import asyncio

import numpy as np

from kit.adapters.artifacts import text_pipeline
from kit.adapters.handoff import Background, Window
from kit.adapters.settings import TextsSettings, model_settings
from kit.adapters.triton import ModelCallError, Replies, infer, input_array
from kit.pipelines.text.pipeline import Result, decode_request_text

DRAIN_S = 60.0  # at unload, how long the texts in flight may take to be answered
ANSWERS = (("SCORE", "CHUNK_SCORES"), ("SCORES", "CHUNK_SCORES"), ("EMBEDDING", "CHUNK_EMBEDDINGS"))  # text's, chunks'


class TritonPythonModel:
    def initialize(self, args):
        self.settings, version_dir = TextsSettings.from_args(args)
        self.name = args["model_name"]
        self.entry = self.settings.parameters_from or self.name  # the model its clients call, which errors name
        outputs = {output["name"] for output in model_settings(args)[0]["output"]}
        self.answers = next(pair for pair in ANSWERS if pair[0] in outputs)
        self.pipeline = text_pipeline(version_dir, self.settings)
        # Version N of radar_texts calls version N of its classifier, the graph exported with its tokenizer and golden
        # set: while a new version is checked (kit.control.deploy) the old one keeps calling the old graph.
        self.version = int(args["model_version"])
        self.window = Window(self.settings.chunks_in_flight)
        self.background = Background(f"{self.name}-{args['model_instance_name']}", self.settings.call_threads or None)

    def text(self, request) -> str:
        return decode_request_text(input_array(request, "TEXT"), self.settings.max_text_bytes)

    def outputs(self, result: Result) -> dict[str, np.ndarray]:
        text, chunks = self.answers
        if text == "SCORE":
            scores = {"SCORE": np.array([result.score], dtype=np.float32), "CHUNK_SCORES": result.chunk_scores}
        else:
            scores = {text: result.values, chunks: result.chunk_values}
        return scores | {"CHUNK_SPANS": result.spans, "TOKENS": np.array([result.tokens], dtype=np.int32)}

    async def classify(self, replies: Replies, kept: list[int], plan, held: int, trace) -> None:
        scores = self.pipeline.scores(plan)

        async def send(number, group):
            inputs = {"input_ids": group.input_ids, "attention_mask": group.attention_mask}
            try:
                (logits,) = await infer(self.settings.classifier, inputs, [self.pipeline.output], trace, self.version)
            except ModelCallError as exc:
                for text in scores.texts_of(number):
                    replies.fail(kept[text], exc)
                return
            for text in scores.add(number, logits):
                replies.answer(kept[text], self.outputs(scores.result(text)))

        try:
            await asyncio.gather(*(send(number, group) for number, group in enumerate(plan.groups)))
        except Exception as exc:  # a bug fails the batch's unanswered texts, not the stub
            replies.close(exc)
        finally:
            replies.close()
            self.window.release(held)

    def execute(self, requests):
        replies = Replies(requests, self.entry)
        try:
            kept, texts = replies.checked(self.text, requests)
            if not texts:
                return None
            plan = self.pipeline.plan_many(texts)
            held = self.window.acquire(len(plan.owners))
        except Exception as exc:  # a bug fails the batch, not the stub
            replies.close(exc)
            return None
        # The first text's trace goes with the chunks, so Triton's request traces show the classifier's work.
        self.background.submit(self.classify(replies, kept, plan, held, requests[kept[0]].trace()))
        return None

    def finalize(self):
        self.window.drain(DRAIN_S)
        self.background.stop()
