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
tokens its chunks took; beside every label's, `LOGITS` [labels], the chunks' logits weighted by length. A request of
several texts gets each output as its texts' one after another along the first axis, and `CHUNKS` [n], each text's
chunk count, to tell the chunks' rows apart. The hand-off and the window of chunks in flight (`chunks_in_flight`) are
every texts model's (kit.adapters.grouped_calls)."""

import numpy as np

from kit.adapters.artifacts import text_pipeline
from kit.adapters.grouped_calls import GroupedModel
from kit.adapters.settings import model_settings
from kit.adapters.triton import input_array
from kit.pipelines.text.pipeline import Result, decode_request_texts

ANSWERS = (("SCORE", "CHUNK_SCORES"), ("SCORES", "CHUNK_SCORES"), ("EMBEDDING", "CHUNK_EMBEDDINGS"))  # text's, chunks'


class TritonPythonModel(GroupedModel):
    def load(self, args, version_dir) -> None:
        outputs = {output["name"] for output in model_settings(args)[0]["output"]}
        self.answers = next(pair for pair in ANSWERS if pair[0] in outputs)
        self.logits = "LOGITS" in outputs
        self.pipeline = text_pipeline(version_dir, self.settings)

    def check(self, request) -> list[str]:
        settings = self.settings
        return decode_request_texts(input_array(request, "TEXT"), settings.max_text_bytes, settings.max_request_texts)

    def answer_of(self, result: Result) -> dict[str, np.ndarray]:
        text, chunks = self.answers
        if text == "SCORE":
            scores = {"SCORE": np.array([result.score], dtype=np.float32), "CHUNK_SCORES": result.chunk_scores}
        else:
            scores = {text: result.values, chunks: result.chunk_values}
        scores |= {"LOGITS": result.logits} if self.logits else {}
        return scores | {"CHUNK_SPANS": result.spans, "TOKENS": np.array([result.tokens], dtype=np.int32)}

    def outputs(self, results: list[Result]) -> dict[str, np.ndarray]:
        """A request's texts' answers, one after another along each output's first axis."""
        answers = [self.answer_of(result) for result in results]
        together = answers[0] if len(answers) == 1 else {name: np.concatenate([a[name] for a in answers]) for name in answers[0]}
        return together | {"CHUNKS": np.array([len(result.spans) for result in results], dtype=np.int32)}
