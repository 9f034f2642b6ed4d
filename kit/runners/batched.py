"""Run a list of Triton requests through a model the way Triton's native backends batch them.

Triton's dynamic batcher hands a runner (the ONNX and PyTorch adapters) a list of requests;
`run_batched` merges those whose tensors have equal shapes (apart from the batch axis) into one
run and splits the outputs back, or runs the groups of a given plan, each stacked by a given
function (padding, where a plan merges shapes). Any callable from named arrays to named arrays is
a model here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Inputs = dict[str, np.ndarray]


def shape_key(inputs: Inputs) -> tuple:
    return tuple(sorted((name, array.shape[1:], array.dtype.str) for name, array in inputs.items()))


def group_by_shape(requests: Sequence[Inputs]) -> list[list[int]]:
    """Indices of requests that can share one run, in order of first appearance."""
    groups: dict[tuple, list[int]] = {}
    for index, inputs in enumerate(requests):
        groups.setdefault(shape_key(inputs), []).append(index)
    return list(groups.values())


def run_batched(
    run: Callable[[Inputs], dict[str, np.ndarray]],
    requests: Sequence[Inputs],
    plan: Sequence[Sequence[int]] | None = None,
    stack: Callable[[list[np.ndarray]], np.ndarray] = np.concatenate,
) -> list[dict[str, np.ndarray] | Exception]:
    """Run each group once (the plan's, or else each shape group); return per request its outputs or
    its own exception. `stack` joins one input's arrays of a group into the batch: concatenation for
    equal shapes; a plan that merges shapes needs one that pads. Outputs are split back by rows.

    When a merged run fails (say one request carries a token id outside the vocabulary), its
    requests are run one by one, so that only the bad request fails and the rest of the batch is
    still answered.
    """
    results: list[dict[str, np.ndarray] | Exception] = [None] * len(requests)  # type: ignore[list-item]
    for group in plan if plan is not None else group_by_shape(requests):
        names = requests[group[0]].keys()
        merged = {name: stack([requests[i][name] for i in group]) for name in names}
        try:
            outputs = run(merged)
        except Exception as exc:
            for i in group:
                results[i] = exc if len(group) == 1 else run_alone(run, requests[i])
            continue
        offsets = np.cumsum([0] + [len(next(iter(requests[i].values()))) for i in group])
        for position, i in enumerate(group):
            start, end = offsets[position], offsets[position + 1]
            results[i] = {name: value[start:end] for name, value in outputs.items()}
    return results


def run_alone(run: Callable[[Inputs], dict[str, np.ndarray]], inputs: Inputs) -> dict[str, np.ndarray] | Exception:
    try:
        return run(inputs)
    except Exception as exc:  # reported to this request's client, not raised
        return exc
