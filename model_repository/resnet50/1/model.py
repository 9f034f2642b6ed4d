"""Triton adapter for resnet50: the dynamic batcher hands over concurrent requests of different image
shapes together (allow_ragged_batch); the merge policy groups them, each group is padded and sent to
the backbone as one BLS request, all groups in flight at once, and each request gets its own rows."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

from kit.backends.adapter import model_settings
from kit.batching.merge import CostModel, Request, group_shape, make_planner, numel
from kit.batching.padding import pad_group, split_rows
from kit.images import ImageError, check_images


def error_response(message, code):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code))


class PaddingMetrics:
    """Counters on Triton's metrics endpoint: backbone runs (of mixed or uniform shapes), items,
    and valid vs padding elements, from which the padding waste follows."""

    def __init__(self, model):
        Counter = pb_utils.MetricFamily.COUNTER
        runs = pb_utils.MetricFamily("padded_batch_runs", "Backbone runs by whether their images had mixed shapes", Counter)
        items = pb_utils.MetricFamily("padded_batch_items", "Images sent to the backbone", Counter)
        elements = pb_utils.MetricFamily("padded_batch_elements", "Input elements sent to the backbone, valid or padding", Counter)
        self.families = (runs, items, elements)  # a family must outlive its metrics
        self.runs = {kind: runs.Metric({"model": model, "shapes": kind}) for kind in ("mixed", "uniform")}
        self.items = items.Metric({"model": model})
        self.elements = {kind: elements.Metric({"model": model, "kind": kind}) for kind in ("valid", "padding")}

    def record(self, requests, group):
        shape = group_shape(requests, group)
        count = sum(requests[i].count for i in group)
        valid = sum(requests[i].count * numel(requests[i].shape) for i in group)
        self.runs["mixed" if any(requests[i].shape != shape for i in group) else "uniform"].increment(1)
        self.items.increment(count)
        self.elements["valid"].increment(valid)
        self.elements["padding"].increment(count * numel(shape) - valid)


class TritonPythonModel:
    def initialize(self, args):
        config, params, version_dir = model_settings(args)
        self.backbone = params["backbone"]
        self.max_pixels = int(params["max_image_pixels"])
        policy = params["merge_policy"]
        cost = CostModel.load(version_dir / params["cost_model"]) if policy == "cost" else None
        self.plan = make_planner(policy, int(config["max_batch_size"]), cost)
        self.metrics = PaddingMetrics(args["model_name"])

    async def classify(self, images):
        pixel_values, sizes = pad_group(images)
        request = pb_utils.InferenceRequest(
            model_name=self.backbone,
            inputs=[pb_utils.Tensor("pixel_values", pixel_values), pb_utils.Tensor("image_sizes", np.ascontiguousarray(sizes[:, 1:]))],
            requested_output_names=["probs"],
        )
        response = await request.async_exec()
        if response.has_error():
            raise RuntimeError(response.error().message())
        return split_rows(pb_utils.get_output_tensor_by_name(response, "probs").as_numpy(), [len(i) for i in images])

    async def execute(self, requests):
        responses = [None] * len(requests)
        accepted, images = [], []
        for index, request in enumerate(requests):
            array = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            try:
                check_images(array, self.max_pixels)
            except ImageError as exc:
                responses[index] = error_response(str(exc), pb_utils.TritonError.INVALID_ARG)
                continue
            accepted.append(index)
            images.append(array)
        shapes = [Request(image.shape[1:], len(image)) for image in images]
        plan = self.plan(shapes)
        results = await asyncio.gather(*(self.classify([images[i] for i in group]) for group in plan), return_exceptions=True)
        for group, result in zip(plan, results):
            if isinstance(result, Exception):
                for i in group:
                    responses[accepted[i]] = error_response(f"{self.backbone} failed: {result}", pb_utils.TritonError.UNAVAILABLE)
                continue
            self.metrics.record(shapes, group)
            for i, probs in zip(group, result):
                responses[accepted[i]] = pb_utils.InferenceResponse([pb_utils.Tensor("PROBS", probs)])
        return responses
