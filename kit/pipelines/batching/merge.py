"""Merge policies: which concurrent requests of different shapes run together as one padded batch.

A request carries `count` items (batch rows) of one per-item `shape`, e.g. (3, 224, 198). A plan is
a list of groups (lists of request indices); each group runs as one batch padded to the
elementwise maximum of its shapes. Every policy returns every request exactly once, in groups of
at most `max_batch` items.

- `none`: every request runs alone.
- `equal_shapes`: requests of identical shape run together (what Triton's dynamic batcher does).
- `paddle`: Paddle Serving's rule, greedy in arrival order: a request joins the open group when the
  padding costs under 1024 bytes or the shapes are over 50% similar (see `paddle_accepts`).
- `cost` (default): the plan with the least predicted run time under a `CostModel` measured on the
  serving hardware, so it merges only when one padded run is cheaper than the separate runs.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

Shape = tuple[int, ...]
Plan = list[list[int]]


@dataclass(frozen=True)
class Request:
    shape: Shape
    count: int = 1


def numel(shape: Shape) -> int:
    return math.prod(shape)


def padded_shape(shapes: Sequence[Shape]) -> Shape:
    return tuple(max(dims) for dims in zip(*shapes))


def group_shape(requests: Sequence[Request], group: Sequence[int]) -> Shape:
    return padded_shape([requests[i].shape for i in group])


def plan_padding_waste(requests: Sequence[Request], plan: Plan) -> float:
    """Fraction of the computed elements that are padding, over all groups of the plan."""
    valid = sum(r.count * numel(r.shape) for r in requests)
    padded = sum(sum(requests[i].count for i in g) * numel(group_shape(requests, g)) for g in plan)
    return 1 - valid / padded if padded else 0.0


@dataclass(frozen=True)
class CostModel:
    """Predicted seconds for one run of `batch` items padded to `shape`, from measurements.

    Per measured item size (elements, ascending): `fixed` + `per_item` x batch, fitted by least
    squares over the measured batch sizes. Between sizes both terms are interpolated linearly in
    elements; below the smallest they are the smallest's, above the largest `per_item` scales with
    elements. `fixed` is what merging saves (per-run overhead, and on a GPU the idle units of a
    small batch); the padded elements are what it costs.
    """

    elements: tuple[int, ...]
    fixed: tuple[float, ...]
    per_item: tuple[float, ...]

    def __call__(self, batch: int, shape: Shape) -> float:
        n = numel(shape)
        if n >= self.elements[-1]:
            return self.fixed[-1] + self.per_item[-1] * batch * n / self.elements[-1]
        if n <= self.elements[0]:
            return self.fixed[0] + self.per_item[0] * batch
        hi = bisect.bisect_right(self.elements, n)
        t = (n - self.elements[hi - 1]) / (self.elements[hi] - self.elements[hi - 1])
        fixed = self.fixed[hi - 1] + t * (self.fixed[hi] - self.fixed[hi - 1])
        per_item = self.per_item[hi - 1] + t * (self.per_item[hi] - self.per_item[hi - 1])
        return fixed + per_item * batch

    @classmethod
    def fit(cls, samples: Sequence[tuple[int, int, float]]) -> CostModel:
        """From (batch, elements, seconds) measurements, at least two batch sizes per element count."""
        by_size: dict[int, list[tuple[int, float]]] = {}
        for batch, elements, seconds in samples:
            by_size.setdefault(elements, []).append((batch, seconds))
        fixed, per_item = [], []
        for points in (by_size[n] for n in sorted(by_size)):
            if len({b for b, _ in points}) < 2:
                raise ValueError("each measured size needs at least two batch sizes")
            mean_b = sum(b for b, _ in points) / len(points)
            mean_t = sum(t for _, t in points) / len(points)
            slope = sum((b - mean_b) * (t - mean_t) for b, t in points) / sum((b - mean_b) ** 2 for b, _ in points)
            slope = max(slope, 1e-9)  # a run never gets cheaper with more items
            fixed.append(max(mean_t - slope * mean_b, 0.0))
            per_item.append(slope)
        return cls(tuple(sorted(by_size)), tuple(fixed), tuple(per_item))

    def to_json(self) -> dict:
        return {key: list(value) for key, value in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict) -> CostModel:
        return cls(tuple(int(n) for n in data["elements"]), tuple(data["fixed"]), tuple(data["per_item"]))


def plan_cost(requests: Sequence[Request], plan: Plan, cost: CostModel) -> float:
    """Predicted seconds to run every group of the plan one after another."""
    return sum(cost(sum(requests[i].count for i in g), group_shape(requests, g)) for g in plan)


def plan_none(requests: Sequence[Request], max_batch: int) -> Plan:
    return [[i] for i in range(len(requests))]


def plan_equal_shapes(requests: Sequence[Request], max_batch: int) -> Plan:
    """Identical shapes together, in order of first appearance, at most `max_batch` items a group."""
    open_groups: dict[Shape, list[int]] = {}
    counts: dict[Shape, int] = {}
    plan: Plan = []
    for i, request in enumerate(requests):
        if request.shape not in open_groups or counts[request.shape] + request.count > max_batch:
            open_groups[request.shape], counts[request.shape] = [], 0
            plan.append(open_groups[request.shape])
        open_groups[request.shape].append(i)
        counts[request.shape] += request.count
    return plan


def paddle_accepts(group: Shape, shape: Shape, itemsize: int = 4, absolute_bytes: int = 1024, ratio: float = 0.5) -> bool:
    """Paddle Serving's merge test (C++ Serving asynchronous mode, `BatchTasks::padding`).

    Both padded to their elementwise maximum M: merge when padding either costs under
    `absolute_bytes` bytes, or both are more than `ratio` similar to M, the similarity being the
    product of the per-dimension ratios x_d / M_d (= numel(x) / numel(M)). Its documentation counts
    bytes, its code elements (pass itemsize=1 for the code's behaviour); its code's ratio test
    divides integers and so always passes, the documented one is used here.
    """
    merged = numel(padded_shape([group, shape]))
    a, b = numel(group), numel(shape)
    small = (merged - a) * itemsize < absolute_bytes and (merged - b) * itemsize < absolute_bytes
    similar = a / merged > ratio and b / merged > ratio
    return small or similar


def plan_paddle(requests: Sequence[Request], max_batch: int, itemsize: int = 4) -> Plan:
    """Greedy in arrival order, as Paddle's batcher fills a batch from its queue: a request that
    does not fit the open group closes it and opens the next."""
    plan: Plan = []
    shape: Shape = ()
    count = 0
    for i, request in enumerate(requests):
        if plan and count + request.count <= max_batch and paddle_accepts(shape, request.shape, itemsize):
            plan[-1].append(i)
            shape = padded_shape([shape, request.shape])
            count += request.count
        else:
            plan.append([i])
            shape, count = request.shape, request.count
    return plan


def segment(requests: Sequence[Request], order: Sequence[int], max_batch: int, cost: CostModel) -> tuple[Plan, float]:
    """The cheapest split of `order` into consecutive groups (exact dynamic programming, O(n^2))."""
    n = len(order)
    best = [0.0] + [math.inf] * n
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        shape: Shape = requests[order[end - 1]].shape
        count = 0
        for start in range(end - 1, -1, -1):
            request = requests[order[start]]
            count += request.count
            if count > max_batch:
                break
            shape = padded_shape([shape, request.shape])
            total = best[start] + cost(count, shape)
            if total < best[end]:
                best[end], cut[end] = total, start
    plan: Plan = []
    end = n
    while end > 0:
        plan.append(list(order[cut[end] : end]))
        end = cut[end]
    return plan[::-1], best[n]


def plan_cost_model(requests: Sequence[Request], max_batch: int, cost: CostModel) -> Plan:
    """The cheapest consecutive split of the requests sorted by size, and by each dimension.

    Sorting puts identical shapes next to each other and similar ones near, so the plans of
    `none` and `equal_shapes` are among the candidates: the result is never predicted slower.
    """
    keys: list[Callable[[int], tuple]] = [lambda i: (numel(requests[i].shape), requests[i].shape)]
    dims = len(requests[0].shape) if requests else 0
    keys += [lambda i, d=d: (requests[i].shape[d], requests[i].shape) for d in range(dims)]
    candidates = [segment(requests, sorted(range(len(requests)), key=key), max_batch, cost) for key in keys]
    return min(candidates, key=lambda c: c[1])[0] if candidates else []


POLICIES = ("none", "equal_shapes", "paddle", "cost")


def make_planner(policy: str, max_batch: int, cost: CostModel | None = None) -> Callable[[Sequence[Request]], Plan]:
    """The plan function of a named policy; `cost` needs a CostModel."""
    if policy == "cost":
        if cost is None:
            raise ValueError("the cost policy needs a measured CostModel")
        return lambda requests: plan_cost_model(requests, max_batch, cost)
    simple = {"none": plan_none, "equal_shapes": plan_equal_shapes, "paddle": plan_paddle}
    if policy not in simple:
        raise ValueError(f"unknown merge policy {policy!r} (known: {', '.join(POLICIES)})")
    return lambda requests: simple[policy](requests, max_batch)
