"""Merge policies for padded batches of mixed shapes, padding and splitting, image checks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.adapters.artifacts import cost_model
from kit.pipelines.batching.merge import (
    POLICIES,
    CostModel,
    Request,
    make_planner,
    paddle_accepts,
    plan_cost,
    plan_equal_shapes,
    plan_none,
    plan_padding_waste,
    plan_paddle,
    segment,
)
from kit.pipelines.batching.padding import pad_group, split_rows
from kit.pipelines.errors import InputError
from kit.pipelines.images import check_images
from perf.sim.device import SIM, write_cost

# Shaped like the measured ResNet-50 on 2 cores: a fixed cost per run and a per-image cost that
# grows with the image (seconds; elements = 3 x side x side).
COST = CostModel(elements=(3 * 64 * 64, 3 * 224 * 224), fixed=(0.004, 0.010), per_item=(0.012, 0.120))

images = st.lists(
    st.builds(Request, st.tuples(st.just(3), st.integers(1, 300), st.integers(1, 300)), st.integers(1, 4)),
    min_size=0,
    max_size=24,
)


# Paddle Serving's documented cases (C++ Serving asynchronous mode), shapes without the batch axis.
@pytest.mark.parametrize(
    "a, b, merge, why",
    [
        ((500, 500), (400, 400), True, "similarity (400/500)^2 = 0.64 > 0.5"),
        ((1, 1), (2, 2), True, "3 elements of padding, under 1024 bytes"),
        ((3, 320, 320), (3, 960, 960), False, "similarity 1/9 and 2.4M elements of padding"),
        ((3, 224, 224), (3, 224, 224), True, "equal shapes"),
        ((3, 174, 174), (3, 274, 274), False, "similarity (174/274)^2 = 0.40"),
        ((3, 200, 274), (3, 274, 200), True, "each 200/274 = 0.73 similar to 274x274"),
        ((3, 130, 274), (3, 274, 130), False, "each 130/274 = 0.47 similar to 274x274"),
    ],
)
def test_paddle_rule_matches_hand_computed_cases(a, b, merge, why):
    assert paddle_accepts(a, b) is merge, why
    assert paddle_accepts(b, a) is merge, why


def test_paddle_absolute_rule_counts_bytes_of_padding_on_both_sides():
    # 3 x 16 x 21 vs 3 x 16 x 16: padding the smaller costs 240 elements = 960 bytes (< 1024) but the
    # merged shape is the larger one, so the larger needs none: merge. One more column is 1152 bytes.
    assert paddle_accepts((3, 16, 16), (3, 16, 21), itemsize=4, ratio=1.0)
    assert not paddle_accepts((3, 16, 16), (3, 16, 22), itemsize=4, ratio=1.0)
    assert paddle_accepts((3, 16, 16), (3, 16, 22), itemsize=1, ratio=1.0)  # Paddle's code counts elements


def test_paddle_plan_is_greedy_in_arrival_order_and_a_misfit_closes_the_group():
    shapes = [(3, 224, 224), (3, 230, 220), (3, 100, 100), (3, 224, 224), (3, 101, 99)]
    plan = plan_paddle([Request(s) for s in shapes], max_batch=8)
    assert plan == [[0, 1], [2], [3], [4]]


def test_equal_shapes_groups_identical_shapes_only_and_respects_max_batch():
    requests = [Request((3, 8, 8), 2), Request((3, 8, 9)), Request((3, 8, 8), 2), Request((3, 8, 8), 1)]
    assert plan_equal_shapes(requests, max_batch=4) == [[0, 2], [1], [3]]


def test_cost_policy_merges_when_the_fixed_cost_outweighs_the_padding_and_not_otherwise():
    planner = make_planner("cost", 64, COST)
    near = [Request((3, 224, 224)), Request((3, 223, 224)), Request((3, 224, 222))]
    far = [Request((3, 64, 64)), Request((3, 224, 224))]
    assert sorted(map(sorted, planner(near))) == [[0, 1, 2]]
    assert sorted(map(sorted, planner(far))) == [[0], [1]]


def test_cost_model_fits_fixed_and_per_item_costs_and_round_trips_through_json(tmp_path):
    samples = [(b, n, f + p * b) for n, f, p in [(100, 0.002, 0.01), (400, 0.004, 0.05)] for b in (1, 2, 4, 8)]
    model = CostModel.fit(samples)
    assert model.elements == (100, 400)
    assert model.fixed == pytest.approx((0.002, 0.004)) and model.per_item == pytest.approx((0.01, 0.05))
    assert model(3, (250,)) == pytest.approx(0.003 + 0.03 * 3)  # halfway between the two sizes
    assert model(1, (800,)) == pytest.approx(0.004 + 0.05 * 2)  # beyond the largest: per item scales
    path = tmp_path / "cost.json"
    path.write_text(json.dumps({"model": model.to_json()}))
    assert cost_model(path) == model


def test_cost_model_needs_two_batch_sizes_per_size():
    with pytest.raises(ValueError, match="two batch sizes"):
        CostModel.fit([(1, 100, 0.01), (1, 400, 0.05)])


def test_unknown_policy_and_cost_without_a_model_are_clear_errors():
    with pytest.raises(ValueError, match="unknown merge policy 'biggest'"):
        make_planner("biggest", 8)
    with pytest.raises(ValueError, match="needs a measured CostModel"):
        make_planner("cost", 8)


@settings(max_examples=150, deadline=None)
@given(images, st.integers(4, 16), st.sampled_from(POLICIES))
def test_every_policy_covers_each_request_exactly_once_within_max_batch(requests, max_batch, policy):
    plan = make_planner(policy, max_batch, COST)(requests)
    assert sorted(i for group in plan for i in group) == list(range(len(requests)))
    assert all(group and sum(requests[i].count for i in group) <= max_batch for group in plan)


@settings(max_examples=150, deadline=None)
@given(images, st.integers(4, 16))
def test_cost_policy_is_never_predicted_slower_than_no_merging_or_equal_shapes(requests, max_batch):
    plan = make_planner("cost", max_batch, COST)(requests)
    cost = plan_cost(requests, plan, COST)
    assert cost <= plan_cost(requests, plan_none(requests, max_batch), COST) + 1e-12
    assert cost <= plan_cost(requests, plan_equal_shapes(requests, max_batch), COST) + 1e-12


@settings(max_examples=60, deadline=None)
@given(st.lists(st.builds(Request, st.tuples(st.integers(1, 512))), min_size=1, max_size=7), st.integers(2, 8))
def test_segmenting_sorted_lengths_is_optimal_over_all_groupings_in_one_dimension(requests, max_batch):
    """With one item per request and costs that grow with size, some optimal grouping is consecutive
    in sorted order (give the group with the smallest maximum the smallest items, and so on)."""
    cost = CostModel(elements=(1, 512), fixed=(0.001, 0.004), per_item=(0.0001, 0.01))
    order = sorted(range(len(requests)), key=lambda i: requests[i].shape)
    _, best = segment(requests, order, max_batch, cost)
    feasible = (p for p in partitions(list(range(len(requests)))) if all(len(g) <= max_batch for g in p))
    assert best == pytest.approx(min(plan_cost(requests, p, cost) for p in feasible))


def partitions(items):
    """Every way to split `items` into groups."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in partitions(rest):
        yield [[first], *partition]
        for k in range(len(partition)):
            yield [*partition[:k], [first, *partition[k]], *partition[k + 1 :]]


def test_plan_padding_waste_counts_padded_elements_of_each_group():
    requests = [Request((3, 10, 10)), Request((3, 5, 10), 2), Request((3, 4, 4))]
    assert plan_padding_waste(requests, [[0, 1], [2]]) == pytest.approx(1 - (300 + 300 + 48) / (900 + 48))
    assert plan_padding_waste(requests, plan_none(requests, 8)) == 0.0


def test_pad_group_pads_bottom_right_with_zeros_and_split_rows_gives_each_its_rows():
    a = np.arange(2 * 3 * 2 * 3, dtype=np.float32).reshape(2, 3, 2, 3) + 1
    b = np.ones((1, 3, 4, 1), dtype=np.float32)
    batch, sizes = pad_group([a, b])
    assert batch.shape == (3, 3, 4, 3)
    assert sizes.tolist() == [[3, 2, 3], [3, 2, 3], [3, 4, 1]]
    np.testing.assert_array_equal(batch[:2, :, :2, :3], a)
    assert not batch[:2, :, 2:].any() and not batch[2, :, :, 1:].any()
    rows = split_rows(np.arange(3)[:, None], [2, 1])
    assert [r.ravel().tolist() for r in rows] == [[0, 1], [2]]
    with pytest.raises(ValueError, match="2 rows for 3 inputs"):
        split_rows(np.zeros((2, 1)), [2, 1])


@pytest.mark.parametrize(
    "shape, fill, message",
    [
        ((1, 3, 0, 5), 0.0, "empty dimension"),
        ((1, 3, 64, 65), 0.0, "exceeds the limit of 4096"),
        ((1, 4, 8, 8), 0.0, r"\[batch, 3, height, width\]"),
        ((1, 3, 8, 8), np.nan, "NaN or infinite"),
        ((1, 3, 8, 8), np.inf, "NaN or infinite"),
    ],
)
def test_bad_images_are_rejected_with_a_reason(shape, fill, message):
    with pytest.raises(InputError, match=message):
        check_images(np.full(shape, fill, dtype=np.float32), max_pixels=64 * 64)


def test_images_at_the_pixel_limit_pass():
    check_images(np.zeros((2, 3, 64, 64), dtype=np.float32), max_pixels=64 * 64)


def test_priced_by_the_h100s_launch_bound_times_mixed_image_shapes_run_as_one_batch(tmp_path):
    """The cost file the simulated H100's profile links in place of the export's (perf/sim): ResNet-50's eager FP16
    times there are flat in the batch, so a cost policy priced by them merges every shape."""
    write_cost(SIM / "h100.json", "resnet50", "fp16", tmp_path / "cost.json")
    assert (tmp_path / "cost.json").read_text() == (SIM / "h100-resnet50-cost.json").read_text(), "regenerate it"
    cost = cost_model(tmp_path / "cost.json")
    rng = np.random.default_rng(3)
    requests = [Request((3, int(h), int(w))) for h, w in rng.integers(174, 275, size=(16, 2))]
    plan = make_planner("cost", 64, cost)(requests)
    assert len(plan) == 1 and sorted(plan[0]) == list(range(16))  # ~11 ms a batch of 1-64 in eager FP16
    assert make_planner("cost", 8, cost)(requests) != plan  # but never past the batch cap
