"""A gate in front of a served model, for tests that need a model held busy by construction (tests.served.gate
writes it into a built repository): while its folder holds the file `closed`, `execute` holds its batch; then it
forwards each request to the model behind it over BLS and answers with that model's answer or error. Each request
that reaches `execute` adds a byte to the folder's `arrived`, so that a test knows what is held."""

import json
import time
from pathlib import Path

import triton_python_backend_utils as pb_utils

POLL_S = 0.01


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = {key: value["string_value"] for key, value in config["parameters"].items()}
        self.folder = Path(parameters["gate_folder"])
        self.target = parameters["gate_target"]
        self.outputs = [output["name"] for output in config["output"]]

    def execute(self, requests):
        with open(self.folder / "arrived", "ab") as arrived:
            arrived.write(b"." * len(requests))
        while (self.folder / "closed").exists():
            time.sleep(POLL_S)
        return [self.forward(request) for request in requests]

    def forward(self, request):
        answer = pb_utils.InferenceRequest(
            model_name=self.target, requested_output_names=self.outputs, inputs=request.inputs()
        ).exec()
        if answer.has_error():
            return pb_utils.InferenceResponse(error=answer.error())
        return pb_utils.InferenceResponse(output_tensors=answer.output_tensors())
