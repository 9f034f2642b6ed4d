"""What the runner models share (the kit's ONNX and PyTorch runners, a runner of a profile's own): Triton's requests
merged into runs, one response each.

Triton's dynamic batcher hands over requests of different shapes where the config allows ragged batches (RADAR's
length buckets). By default each shape runs as its own batch. With a cost model of its runs (the times the PyTorch
runner measured at its warm-up, `merge_measured`), the requests are planned by kit.pipelines.batching.merge's cost
rule instead: shapes run together,
padded with zeros at the end of each axis, where one padded run is predicted cheaper than separate ones, as on a GPU
whose small batches cost a launch each. Zero padding suits inputs whose padding is masked (token ids beside an
attention mask); the outputs must be one row per item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kit.adapters.settings import model_settings
from kit.adapters.triton import error_response, input_array, response
from kit.pipelines.batching.merge import CostModel, Plan, Request, make_planner
from kit.pipelines.batching.padding import pad_group
from kit.runners.batched import run_batched


def padded(arrays: list[np.ndarray]) -> np.ndarray:
    return pad_group(arrays)[0]


class RunnerModel:
    """Base of a runner's TritonPythonModel: `initialize` sets `self.model` (named arrays in and out)
    after `tensor_names` and `plan_runs`; `execute` runs each planned group once and isolates a failing request."""

    model: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
    input_names: list[str]
    planner: Callable[[Sequence[Request]], Plan] | None = None
    bad_input: tuple[type[Exception], ...] = ()  # what the model raises for a request's own bad input: INVALID_ARG

    def tensor_names(self, args: dict) -> list[str]:
        """Keeps the config's input names for `execute`; returns its output names, which the runner serves."""
        config, _, _ = model_settings(args)
        self.input_names = [i["name"] for i in config["input"]]
        return [o["name"] for o in config["output"]]

    def plan_runs(self, args: dict, cost: CostModel) -> None:
        """Plans each execution's runs by the cost `cost` gives (work per item: the first input's elements per row,
        tokens or pixels, as the cost model counts them)."""
        if cost is not None:
            config, _, _ = model_settings(args)
            self.planner = make_planner("cost", int(config["max_batch_size"]), cost)

    def execute(self, requests):
        inputs = [{name: input_array(request, name) for name in self.input_names} for request in requests]
        plan = None
        if self.planner is not None:
            first = [request[self.input_names[0]] for request in inputs]
            plan = self.planner([Request(tuple(array.shape[1:]), len(array)) for array in first])
        return [
            self.error(result) if isinstance(result, Exception) else response(result)
            for result in run_batched(self.model, inputs, plan, padded if plan is not None else np.concatenate)
        ]

    def error(self, exc: Exception):
        if isinstance(exc, self.bad_input):
            return error_response(f"the model refused this input: {exc}")
        return error_response(f"inference failed: {exc}", "INTERNAL")
