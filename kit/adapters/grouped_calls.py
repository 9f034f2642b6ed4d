"""What a text model's texts model and a cross-encoder's pairs model share (kit/adapters/text_classifier_model.py,
pair_ranker_model.py): a batch of requests is checked, planned into groups of chunks merged across requests, and
handed to a loop of its own once its chunks fit the window (kit.adapters.handoff); there each group goes to the
classifier as one request, all at once, and each request is answered as soon as the last group holding one of its
chunks has. A request may carry several items (the texts a front door coalesced into one request): its answer waits
for all of them, and holds their outputs one after another."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import numpy as np

from kit.adapters.handoff import Window
from kit.adapters.triton import ModelCallError, Replies


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
