"""One inference of a model's named tensors over gRPC or HTTP with tritonclient, for the served tests of models a user
brings (graphs, pipelines)."""

from __future__ import annotations

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import np_to_triton_dtype


def infer(url: str, protocol: str, model: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
    lib = grpcclient if protocol == "grpc" else httpclient
    client = lib.InferenceServerClient(url)
    try:
        tensors = []
        for name, array in inputs.items():
            tensor = lib.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        result = client.infer(model, tensors)
        return {name: result.as_numpy(name) for name in outputs}
    finally:
        client.close()
