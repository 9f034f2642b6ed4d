"""Triton Python-backend adapter for an ONNX model (installed as `model.py` by kit.repository)."""


import triton_python_backend_utils as pb_utils

from kit.backends.adapter import model_settings
from kit.onnx_runner import OnnxModel, run_batched


class TritonPythonModel:
    def initialize(self, args):
        config, params, version_dir = model_settings(args)
        self.input_names = [i["name"] for i in config["input"]]
        output_names = [o["name"] for o in config["output"]]
        self.model = OnnxModel(version_dir / params["onnx_model"], int(params["intra_op_threads"]), output_names)

    def execute(self, requests):
        inputs = [
            {name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.input_names}
            for request in requests
        ]
        responses = []
        for result in run_batched(self.model, inputs):
            if isinstance(result, Exception):
                error = pb_utils.TritonError(f"inference failed: {result}", pb_utils.TritonError.INTERNAL)
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(k, v) for k, v in result.items()]))
        return responses
