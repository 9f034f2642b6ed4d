"""What a text model's texts model and a cross-encoder's pairs model share (kit/adapters/text_classifier_model.py,
pair_ranker_model.py): a batch of requests is checked, planned into groups of chunks merged across requests, and
handed to a loop of its own once its chunks fit the window (kit.adapters.handoff); there each group goes to the
classifier as one request, all at once, and each request is answered as soon as the last group holding one of its
chunks has."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import numpy as np

from kit.adapters.handoff import Window
from kit.adapters.triton import ModelCallError, Replies


def hand_off(requests, entry: str, check: Callable, plan_many: Callable, window: Window, submit: Callable) -> None:
    """`check(request)` each request (its bad input fails it alone), plan the rest with `plan_many`, wait for room in
    `window`, then `submit(replies, kept, plan, held, trace)`: the batch's answers go on from there."""
    replies = Replies(requests, entry)
    try:
        kept, items = replies.checked(check, requests)
        if not items:
            return
        plan = plan_many(items)
        held = window.acquire(len(plan.owners))
    except Exception as exc:  # a bug fails the batch, not the stub
        replies.close(exc)
        return
    # The first request's trace goes with the chunks, so Triton's request traces show the classifier's work.
    submit(replies, kept, plan, held, requests[kept[0]].trace())


async def answer_groups(
    replies: Replies,
    kept: list[int],
    plan,
    scores,
    call: Callable[[object], Awaitable[np.ndarray]],
    outputs: Callable[[object], dict[str, np.ndarray]],
    window: Window,
    held: int,
) -> None:
    """Every group of `plan` through `call(group)` (the classifier's output), at once; each request answered with
    `outputs(result)` when its groups are in (`scores`: kit.pipelines.text.pipeline.BatchScores), or failed with the
    call that failed it; the window's `held` units released at the end."""

    async def send(number, group):
        try:
            result = await call(group)
        except ModelCallError as exc:
            for item in scores.texts_of(number):
                replies.fail(kept[item], exc)
            return
        for item in scores.add(number, result):
            replies.answer(kept[item], outputs(scores.result(item)))

    try:
        await asyncio.gather(*(send(number, group) for number, group in enumerate(plan.groups)))
    except Exception as exc:  # a bug fails the batch's unanswered requests, not the stub
        replies.close(exc)
    finally:
        replies.close()
        window.release(held)
