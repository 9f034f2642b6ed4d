"""Triton adapter for a text classifier's texts (RADAR's `radar_texts`, and the `<name>_texts` of every
text-classification spec, kit.control.text_task), installed as their model.py by the repository builder. A batch
of texts (from the entry ensemble, many clients') is chunked and tokenized at once, and its chunks go to the
classifier as BLS requests merged across texts, one per length bucket and classifier batch, all in flight
together; each text is answered as soon as the last request holding one of its chunks has
(kit.pipelines.text.pipeline.BatchScores), so a short text does not wait for a long one. A request may carry several
texts (TEXT [n], at most `max_request_texts`: what a front door coalesces); it is answered once all of its texts are.

Its config's outputs say what a text's answer holds: `SCORE` and `CHUNK_SCORES` [-1], one label's probability
(RADAR's AI-generated label), `SCORES` [labels] and `CHUNK_SCORES` [-1, labels], every label's, or `EMBEDDING`
[dimensions] and `CHUNK_EMBEDDINGS` [-1, dimensions], an encoder's (a feature-extraction spec's); and `TOKENS` [1], the
tokens its chunks took. A request of several texts gets each output as its texts' one after another along the first
axis, and `CHUNKS` [n], each text's chunk count, to tell the chunks' rows apart.

`execute` hands the batch to a loop of its own and returns once its chunks fit the window of chunks in flight
(kit.adapters.handoff), so the instance takes its next batch while this one's answers are on their way: how many
texts are in flight follows from what the classifier takes (`chunks_in_flight`), not from instances x batch."""

import numpy as np

from kit.adapters.artifacts import text_pipeline
from kit.adapters.grouped_calls import Carried, answer_groups, hand_off
from kit.adapters.handoff import Background, Window
from kit.adapters.settings import TextsSettings, model_settings
from kit.adapters.triton import Replies, infer, input_array
from kit.pipelines.text.pipeline import Result, decode_request_texts

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
        # set: while a new version is checked (kit.server.deploy) the old one keeps calling the old graph.
        self.version = int(args["model_version"])
        self.window = Window(self.settings.chunks_in_flight)
        self.background = Background(f"{self.name}-{args['model_instance_name']}", self.settings.call_threads or None)

    def texts(self, request) -> list[str]:
        settings = self.settings
        return decode_request_texts(input_array(request, "TEXT"), settings.max_text_bytes, settings.max_request_texts)

    def answer(self, result: Result) -> dict[str, np.ndarray]:
        text, chunks = self.answers
        if text == "SCORE":
            scores = {"SCORE": np.array([result.score], dtype=np.float32), "CHUNK_SCORES": result.chunk_scores}
        else:
            scores = {text: result.values, chunks: result.chunk_values}
        return scores | {"CHUNK_SPANS": result.spans, "TOKENS": np.array([result.tokens], dtype=np.int32)}

    def outputs(self, results: list[Result]) -> dict[str, np.ndarray]:
        """A request's texts' answers, one after another along each output's first axis."""
        answers = [self.answer(result) for result in results]
        together = answers[0] if len(answers) == 1 else {name: np.concatenate([a[name] for a in answers]) for name in answers[0]}
        return together | {"CHUNKS": np.array([len(result.spans) for result in results], dtype=np.int32)}

    async def classify(self, replies: Replies, carried: Carried, plan, held: int, trace) -> None:
        async def call(group):
            inputs = {"input_ids": group.input_ids, "attention_mask": group.attention_mask}
            (logits,) = await infer(self.settings.classifier, inputs, [self.pipeline.output], trace, self.version)
            return logits

        await answer_groups(replies, carried, plan, self.pipeline.scores(plan), call, self.outputs, self.window, held)

    def execute(self, requests):
        hand_off(requests, self.entry, self.texts, self.pipeline.plan_many, self.window, self.background_classify)

    def background_classify(self, *work) -> None:
        self.background.submit(self.classify(*work))

    def finalize(self):
        self.window.drain(DRAIN_S)
        self.background.stop()
