"""What the ONNX and PyTorch runner models share: Triton's requests merged by shape, one response each."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kit.adapters.settings import model_settings
from kit.adapters.triton import error_response, input_array, response
from kit.runners.batched import run_batched


class RunnerModel:
    """Base of a runner's TritonPythonModel: `initialize` sets `self.model` (named arrays in and out)
    after `tensor_names`; `execute` runs every shape group once and isolates a failing request."""

    model: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
    input_names: list[str]

    def tensor_names(self, args: dict) -> list[str]:
        """Keeps the config's input names for `execute`; returns its output names, which the runner serves."""
        config, _, _ = model_settings(args)
        self.input_names = [i["name"] for i in config["input"]]
        return [o["name"] for o in config["output"]]

    def execute(self, requests):
        inputs = [{name: input_array(request, name) for name in self.input_names} for request in requests]
        return [
            error_response(f"inference failed: {result}", "INTERNAL") if isinstance(result, Exception) else response(result)
            for result in run_batched(self.model, inputs)
        ]
