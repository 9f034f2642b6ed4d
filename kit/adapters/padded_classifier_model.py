"""Triton adapter for the entry of an image classifier of pixels (kit.control.image_task, ResNet-50's among them): the
dynamic batcher hands over concurrent requests of different image shapes together (allow_ragged_batch); the merge
policy groups them, each group is padded and sent to the backbone as one BLS request, all groups in flight at once,
and each request gets its own rows."""

import asyncio

import numpy as np

from kit.adapters.artifacts import cost_model
from kit.adapters.settings import PixelClassifierSettings, model_settings
from kit.adapters.triton import error_response, infer, input_array, pb, response
from kit.pipelines.batching.merge import Request, group_shape, make_planner, numel
from kit.pipelines.batching.padding import pad_group, split_rows
from kit.pipelines.errors import InputError
from kit.pipelines.images import check_images


class PaddingMetrics:
    """Counters on Triton's metrics endpoint: backbone runs (of mixed or uniform shapes), items,
    and valid vs padding elements, from which the padding waste follows."""

    def __init__(self, model):
        family, counter = pb().MetricFamily, pb().MetricFamily.COUNTER
        runs = family("padded_batch_runs", "Backbone runs by whether their images had mixed shapes", counter)
        items = family("padded_batch_items", "Images sent to the backbone", counter)
        elements = family("padded_batch_elements", "Input elements sent to the backbone, valid or padding", counter)
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
        config, _, _ = model_settings(args)
        self.settings, version_dir = PixelClassifierSettings.from_args(args)
        policy = self.settings.merge_policy
        cost = None
        if policy == "cost":  # as measured at export, or as the file a profile links in its place
            cost = cost_model(version_dir / self.settings.cost_model)
        self.plan = make_planner(policy, int(config["max_batch_size"]), cost)
        self.name = args["model_name"]
        self.metrics = PaddingMetrics(self.name)

    async def classify(self, images):
        pixel_values, sizes = pad_group(images)
        inputs = {"pixel_values": pixel_values, "image_sizes": np.ascontiguousarray(sizes[:, 1:])}
        (probs,) = await infer(self.settings.backbone, inputs, ["probs"])
        return split_rows(probs, [len(i) for i in images])

    async def execute(self, requests):
        responses = [None] * len(requests)
        accepted, images = [], []
        for index, request in enumerate(requests):
            array = input_array(request, "INPUT")
            try:
                check_images(array, self.settings.max_image_pixels)
            except InputError as exc:
                responses[index] = error_response(str(exc), "INVALID_ARG")
                continue
            accepted.append(index)
            images.append(array)
        shapes = [Request(image.shape[1:], len(image)) for image in images]
        plan = self.plan(shapes)
        results = await asyncio.gather(*(self.classify([images[i] for i in group]) for group in plan), return_exceptions=True)
        for group, result in zip(plan, results):
            if isinstance(result, Exception):
                for i in group:
                    responses[accepted[i]] = error_response(f"{self.name} failed: {result}", "UNAVAILABLE")
                continue
            self.metrics.record(shapes, group)
            for i, probs in zip(group, result):
                responses[accepted[i]] = response({"PROBS": probs})
        return responses
