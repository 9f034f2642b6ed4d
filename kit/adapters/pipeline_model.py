"""Triton adapter for a `pipeline` spec's entry (kit.control.pipeline_task), installed as its model.py by the
repository builder: the user's module (kit.pipelines.custom) run on the rows of a whole batch of requests at once
(kit.adapters.custom_pipeline.answer_many), its networks called over BLS as batched models of this server, where the
calls of concurrent batches meet in their batchers, or over ONNX Runtime in this process (`engines: in_process`). An
unbatched entry (max_batch_size 0) runs each request alone, its tensors whole.

`execute` hands a batch's requests to a loop of its own and returns once they fit the window of requests in flight
(kit.adapters.handoff); an unbatched entry of one request in flight per instance awaits each in `execute` instead.
Bad input (Triton's own checks, a ValueError of the user's code) fails its request alone as
INVALID_ARG; a network's failure fails the requests that called it as UNAVAILABLE; a bug in the user's code fails its
requests as INTERNAL; the model keeps serving."""

from kit.adapters.custom_pipeline import answer_many, pipeline_networks, ready_definition
from kit.adapters.handoff import Background, Window
from kit.adapters.settings import PipelineSettings, model_settings
from kit.adapters.triton import Replies, input_array
from kit.pipelines.custom import answer

DRAIN_S = 60.0  # at unload, how long the requests in flight may take to be answered


class TritonPythonModel:
    def initialize(self, args):
        config, params, version_dir = model_settings(args)
        self.settings = PipelineSettings.from_parameters(params)
        self.name = args["model_name"]
        self.rows = config["max_batch_size"] > 0
        self.pipeline = ready_definition(version_dir / self.settings.pipeline_module, self.settings, version_dir)
        self.networks = pipeline_networks(self.pipeline, self.settings, version_dir)
        self.window, self.background = None, None
        if not self.rows and self.settings.requests_in_flight == 1:
            self.execute = self.execute_awaited
            return
        self.window = Window(self.settings.requests_in_flight)
        self.background = Background(f"{self.name}-{args['model_instance_name']}", self.settings.requests_in_flight)

    async def execute_awaited(self, requests):
        """One request at a time per instance, awaited in `execute` on the stub's own loop (an unbatched entry of one
        request in flight, as the OCR entries are): a loop of its own would only add a hop."""
        replies = Replies(requests, self.name)
        try:
            kept, inputs = replies.checked(self.inputs, requests)
            for index, values in zip(kept, inputs):
                try:
                    replies.answer(index, await answer(self.pipeline, values, self.networks, False))
                except Exception as exc:  # the request's own: bad input, a refused network, a bug in the module
                    replies.fail(index, exc)
        finally:
            replies.close()

    def inputs(self, request) -> dict:
        return {tensor.name: input_array(request, tensor.name) for tensor in self.pipeline.inputs}

    async def run(self, replies: Replies, kept: list[int], inputs: list[dict], held: int) -> None:
        try:
            for index, result in zip(kept, await answer_many(self.pipeline, inputs, self.networks, self.rows)):
                if isinstance(result, Exception):
                    replies.fail(index, result)
                else:
                    replies.answer(index, result)
        finally:
            replies.close()
            self.window.release(held)

    def execute(self, requests):
        replies = Replies(requests, self.name)
        try:
            kept, inputs = replies.checked(self.inputs, requests)
            if not inputs:
                return None
            held = self.window.acquire(len(inputs))
        except Exception as exc:  # a bug fails the batch, not the stub
            replies.close(exc)
            return None
        self.background.submit(self.run(replies, kept, inputs, held))
        return None

    def finalize(self):
        if self.background is not None:
            self.window.drain(DRAIN_S)
            self.background.stop()
