"""Triton adapter for a `pipeline` spec's entry (kit.control.pipeline_task), installed as its model.py by the
repository builder: the user's module (kit.pipelines.custom) run on the rows of a whole batch of requests at once
(kit.adapters.custom_pipeline.answer_many), its networks called over BLS as batched models of this server, where the
calls of concurrent batches meet in their batchers.

`execute` hands a batch's requests to a loop of its own and returns once they fit the window of requests in flight
(kit.adapters.handoff). Bad input (Triton's own checks, a ValueError of the user's code) fails its request alone as
INVALID_ARG; a network's failure fails the requests that called it as UNAVAILABLE; a bug in the user's code fails its
requests as INTERNAL; the model keeps serving."""

from kit.adapters.custom_pipeline import answer_many, load_definition, served_networks
from kit.adapters.handoff import Background, Window
from kit.adapters.settings import PipelineSettings
from kit.adapters.triton import Replies, input_array

DRAIN_S = 60.0  # at unload, how long the requests in flight may take to be answered


class TritonPythonModel:
    def initialize(self, args):
        self.settings, version_dir = PipelineSettings.from_args(args)
        self.name = args["model_name"]
        self.pipeline = load_definition(version_dir / self.settings.pipeline_module)
        self.networks = served_networks(self.settings.networks, self.settings.max_rows)
        self.window = Window(self.settings.requests_in_flight)
        self.background = Background(f"{self.name}-{args['model_instance_name']}", self.settings.requests_in_flight)

    def inputs(self, request) -> dict:
        return {tensor.name: input_array(request, tensor.name) for tensor in self.pipeline.inputs}

    async def run(self, replies: Replies, kept: list[int], inputs: list[dict], held: int) -> None:
        try:
            for index, result in zip(kept, await answer_many(self.pipeline, inputs, self.networks)):
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
        self.window.drain(DRAIN_S)
        self.background.stop()
