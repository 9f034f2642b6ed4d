"""What a text model's texts model, a cross-encoder's pairs model and a token classifier's tokens model share
(kit/adapters/text_classifier_model.py, pair_ranker_model.py, token_classifier_model.py): a batch of requests is
checked, planned into groups of chunks merged across requests, and handed to a loop of its own once its chunks fit the
window (kit.adapters.handoff); there each group goes to the classifier as one request, all at once, and each request is
answered as soon as the last group holding one of its chunks has. A request may carry several items (the texts a front
door coalesced into one request): its answer waits for all of them, and holds their outputs one after another.
`GroupedModel` is the three models' TritonPythonModel less what is each one's own: its pipeline, a request's items, a
group's tensors and a request's outputs.

A request with the parameter `tokenize` (the door's, for TEI's /tokenize) is answered at once with its text's tokens as
the model's tokenizer makes them (kit.pipelines.text.tokenized), `add_special_tokens` (true unless the parameter says
otherwise) as asked: TOKENIZED_IDS, TOKENIZED_TEXTS and TOKENIZED_SPANS; nothing is sent to the classifier."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import numpy as np

from kit.adapters.handoff import Background, Window
from kit.adapters.settings import TextsSettings
from kit.adapters.triton import ModelCallError, Replies, infer, input_array, request_parameters
from kit.pipelines.text.pipeline import decode_request_text
from kit.pipelines.text.tokenized import tokenized

DRAIN_S = 60.0  # at unload, how long the work in flight may take to be answered
TOKENIZE = "tokenize"  # the request parameter that asks for a text's tokens instead of the model's answer


class Carried:
    """The items each kept request of a batch carries, flattened in request order for the plan, and each request's
    results gathered as its items complete."""

    def __init__(self, kept: list[int], counts: list[int]):
        self.kept = kept
        self.owner = [place for place, count in enumerate(counts) for _ in range(count)]  # item -> its request's place
        self.results: list[list] = [[None] * count for count in counts]
        self.first = np.cumsum([0, *counts])[:-1].tolist()
        self.left = list(counts)

    def request(self, item: int) -> int:
        """The batch's index of the request that carries `item`."""
        return self.kept[self.owner[item]]

    def add(self, item: int, result) -> list | None:
        """`item`'s result; its request's results in order once this was the last of them."""
        place = self.owner[item]
        self.results[place][item - self.first[place]] = result
        self.left[place] -= 1
        return self.results[place] if self.left[place] == 0 else None


def hand_off(requests, entry: str, check: Callable, plan_many: Callable, window: Window, submit: Callable) -> None:
    """`check(request)` each request (the list of items it carries; bad input fails it alone), plan the rest with
    `plan_many`, wait for room in `window`, then `submit(replies, carried, plan, held, trace)`: the batch's answers go
    on from there."""
    replies = Replies(requests, entry)
    try:
        kept, carried = replies.checked(check, requests)
        if not carried:
            return
        plan = plan_many([item for items in carried for item in items])
        held = window.acquire(len(plan.owners))
    except Exception as exc:  # a bug fails the batch, not the stub
        replies.close(exc)
        return
    # The first request's trace goes with the chunks, so Triton's request traces show the classifier's work.
    submit(replies, Carried(kept, [len(items) for items in carried]), plan, held, requests[kept[0]].trace())


async def answer_groups(
    replies: Replies,
    carried: Carried,
    plan,
    scores,
    call: Callable[[object], Awaitable[np.ndarray]],
    outputs: Callable[[list], dict[str, np.ndarray]],
    window: Window,
    held: int,
) -> None:
    """Every group of `plan` through `call(group)` (the classifier's output), at once; each request answered with
    `outputs(results)` of its items when their groups are in (`scores`: kit.pipelines.text.pipeline.BatchScores), or
    failed with the call that failed one of them; the window's `held` units released at the end."""

    async def send(number, group):
        try:
            result = await call(group)
        except ModelCallError as exc:
            for item in scores.texts_of(number):
                replies.fail(carried.request(item), exc)
            return
        for item in scores.add(number, result):
            results = carried.add(item, scores.result(item))
            if results is not None:
                replies.answer(carried.request(item), outputs(results))

    try:
        await asyncio.gather(*(send(number, group) for number, group in enumerate(plan.groups)))
    except Exception as exc:  # a bug fails the batch's unanswered requests, not the stub
        replies.close(exc)
    finally:
        replies.close()
        window.release(held)


class GroupedModel:
    """Base of a TritonPythonModel that plans its batches into groups for a classifier (the graph its settings name,
    version N of it from version N of this model: while a new version is checked, kit.server.deploy, the old one keeps
    calling the old graph). A subclass sets `self.pipeline` in `load` (its `plan_many`, `scores` and graph `output`)
    and says what a request carries (`check`: its list of items), what a group sends (`inputs`) and what a request's
    items' results answer (`outputs`)."""

    settings_type: type[TextsSettings] = TextsSettings
    text_input = "TEXT"  # the input whose text a `tokenize` request's tokens are of

    def initialize(self, args):
        self.settings, version_dir = self.settings_type.from_args(args)
        self.name = args["model_name"]
        self.entry = self.settings.parameters_from or self.name  # the model its clients call, which errors name
        self.version = int(args["model_version"])
        self.window = Window(self.settings.chunks_in_flight)
        self.background = Background(f"{self.name}-{args['model_instance_name']}", self.settings.call_threads or None)
        self.load(args, version_dir)

    def load(self, args, version_dir) -> None:
        raise NotImplementedError

    def check(self, request) -> list:
        """The items the request carries, decoded; InputError fails it alone."""
        raise NotImplementedError

    def inputs(self, group) -> dict[str, np.ndarray]:
        return {"input_ids": group.input_ids, "attention_mask": group.attention_mask}

    def outputs(self, results: list) -> dict[str, np.ndarray]:
        """A request's answer from its items' results, in order."""
        raise NotImplementedError

    def execute(self, requests):
        asked = [request_parameters(request) for request in requests]
        listed = [(request, parameters) for request, parameters in zip(requests, asked) if parameters.get(TOKENIZE)]
        if listed:
            self.tokenize(listed)
        rest = [request for request, parameters in zip(requests, asked) if not parameters.get(TOKENIZE)]
        hand_off(rest, self.entry, self.check, self.pipeline.plan_many, self.window, self.submit)

    def tokenize(self, listed: list) -> None:
        """Each (request, parameters) answered with its text's tokens; a text the model would refuse fails alone."""
        replies = Replies([request for request, _ in listed], self.entry)
        for index, (request, parameters) in enumerate(listed):
            try:
                text = decode_request_text(input_array(request, self.text_input), self.settings.max_text_bytes, self.text_input)
                tokens = tokenized(self.pipeline.tokenizer, text, bool(parameters.get("add_special_tokens", True)))
            except Exception as exc:  # InputError: that request alone; a bug fails it as INTERNAL
                replies.fail(index, exc)
                continue
            texts = np.array([token.encode("utf-8") for token in tokens.tokens], dtype=np.object_)
            replies.answer(index, {"TOKENIZED_IDS": tokens.ids, "TOKENIZED_TEXTS": texts, "TOKENIZED_SPANS": tokens.spans})

    def submit(self, *work) -> None:
        self.background.submit(self.answer(*work))

    async def answer(self, replies: Replies, carried: Carried, plan, held: int, trace) -> None:
        async def call(group):
            (logits,) = await infer(self.settings.classifier, self.inputs(group), [self.pipeline.output], trace, self.version)
            return logits

        await answer_groups(replies, carried, plan, self.pipeline.scores(plan), call, self.outputs, self.window, held)

    def finalize(self):
        self.window.drain(DRAIN_S)
        self.background.stop()
