"""door.wire builds the request tritonclient builds, byte for byte, without copying a body's bytes."""

from __future__ import annotations

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2
from tritonclient.grpc._utils import _get_inference_request

from door import wire
from door.shared_memory import Placed


def tritonclients(model, arrays, datatypes, outputs, request_id, parameters, placed=None) -> bytes:
    inputs = []
    for name, array in arrays.items():
        tensor = grpcclient.InferInput(name, list(array.shape), datatypes[name])
        if placed and name in placed:
            tensor.set_shared_memory(placed[name].region, placed[name].size, placed[name].offset)
        else:
            tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return _get_inference_request(
        model_name=model,
        inputs=inputs,
        model_version="",
        request_id=request_id,
        outputs=[grpcclient.InferRequestedOutput(name) for name in outputs],
        sequence_id=0,
        sequence_start=False,
        sequence_end=False,
        priority=0,
        timeout=None,
        parameters=parameters,
    ).SerializeToString()


def test_the_request_is_tritonclients_to_the_byte():
    body = np.arange(24, dtype="<f4").tobytes()
    arrays = {
        "INPUT": np.frombuffer(body, dtype="<f4").reshape(2, 3, 4)[np.newaxis],
        "TEXT": np.array([["é".encode(), b""]], dtype=np.object_),
        "IDS": np.arange(6, dtype=np.int64).reshape(2, 3)[:, ::2],  # a strided view: copied in order
        "FLAG": np.array([True, False]),
        "EMPTY": np.zeros((0, 3), dtype=np.float32),
    }
    datatypes = {"INPUT": "FP32", "TEXT": "BYTES", "IDS": "INT64", "FLAG": "BOOL", "EMPTY": "FP32"}
    parameters = {"tokenize": True, "count": 3, "scale": 0.5, "mode": "x"}
    ours = wire.request("m", arrays, datatypes, ("PROBS", "LOGITS"), "id-1", parameters).SerializeToString()
    assert ours == tritonclients("m", arrays, datatypes, ("PROBS", "LOGITS"), "id-1", parameters)


def test_a_tensor_that_views_a_whole_body_goes_as_the_body_itself():
    body = np.arange(24, dtype="<f4").tobytes()
    assert wire.content(np.frombuffer(body, dtype="<f4").reshape(2, 3, 4)[np.newaxis], "FP32") is body
    assert wire.content(np.frombuffer(body, dtype="<f4")[:6], "FP32") == body[:24]  # a part of it is copied


def test_tensors_in_shared_memory_are_named_by_region_as_tritonclient_names_them():
    arrays = {name: np.arange(6, dtype="<f4").reshape(2, 3) for name in ("A", "B", "C")}
    datatypes = dict.fromkeys(arrays, "FP32")
    for placed in ({"B": Placed("kit-door-1-ab", 4096, 24, 1)}, {"A": Placed("r", 0, 24, 1), "C": Placed("r", 64, 24, 1)}):
        ours = wire.request("m", arrays, datatypes, ("P",), "id", None, placed)
        assert len(ours.raw_input_contents) == len(arrays) - len(placed)  # the others' contents, in order
        theirs = service_pb2.ModelInferRequest.FromString(tritonclients("m", arrays, datatypes, ("P",), "id", None, placed))
        assert ours == theirs  # as messages: a map's entries may be serialized in either order
