"""Triton's gRPC inference request, built from the door's arrays with Triton's own protobuf classes, and its channel.

tritonclient builds the same message through an InferInput per tensor, which copies each array (`tobytes`) before
protobuf copies it again: for a pixels body of 1.8 MB that was most of the door's cost of building the request. Here a
tensor that views a whole body's bytes (np.frombuffer: a binary pixels body, or base64's decoded data) goes into the
message as that bytes object, and the answer is read with tritonclient's InferResult, as before.
"""

from __future__ import annotations

import grpc
import numpy as np
from tritonclient.grpc import InferResult, service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException, serialize_bf16_tensor, serialize_byte_tensor

from door.shared_memory import Placed

MAX_MESSAGE = 2**31 - 1  # tritonclient's limit both ways: a request is bounded by the door's body caps
PARAMETER_FIELDS = ((bool, "bool_param"), (int, "int64_param"), (float, "double_param"), (str, "string_param"))


def request(
    model: str,
    arrays: dict[str, np.ndarray],
    datatypes: dict[str, str],
    outputs: tuple[str, ...],
    request_id: str,
    parameters: dict | None,
    placed: dict[str, Placed] | None = None,
) -> service_pb2.ModelInferRequest:
    """The request of `arrays` (each of its protocol type in `datatypes`) to `model`, asking for `outputs`; the tensors
    in `placed` lie in Triton's shared memory (door.shared_memory), the others go in the message."""
    message = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    for name, array in arrays.items():
        tensor = message.inputs.add(name=name, datatype=datatypes[name], shape=array.shape)
        if placed and name in placed:
            spot = placed[name]
            tensor.parameters["shared_memory_region"].string_param = spot.region
            tensor.parameters["shared_memory_byte_size"].int64_param = spot.size
            if spot.offset:  # as tritonclient writes it: no offset is offset 0
                tensor.parameters["shared_memory_offset"].int64_param = spot.offset
        else:
            message.raw_input_contents.append(content(array, datatypes[name]))
    for name in outputs:
        message.outputs.add(name=name)
    for key, value in (parameters or {}).items():
        field = next(field for kind, field in PARAMETER_FIELDS if isinstance(value, kind))  # bool before int
        setattr(message.parameters[key], field, value)
    return message


def content(array: np.ndarray, datatype: str) -> bytes:
    """The tensor's bytes as Triton reads them: the bytes object it views where it views one whole and in order."""
    if datatype == "BYTES":
        return serialize_byte_tensor(array).item() if array.size else b""
    if datatype == "BF16":
        return serialize_bf16_tensor(array).item() if array.size else b""
    owner = array
    while isinstance(owner, np.ndarray):
        owner = owner.base
    whole = isinstance(owner, bytes) and array.flags.c_contiguous and array.nbytes == len(owner)
    return owner if whole and array.dtype.byteorder != ">" else array.tobytes()


class Channel:
    """A gRPC channel to Triton for inference requests (the door's tritonclient asks everything else on its own)."""

    def __init__(self, url: str):
        options = [("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE)]
        self.channel = grpc.aio.insecure_channel(url, options=options)
        self.stub = service_pb2_grpc.GRPCInferenceServiceStub(self.channel)

    async def infer(self, message: service_pb2.ModelInferRequest, seconds: float) -> InferResult:
        """Triton's answer to `message` within `seconds`; a refusal raised as tritonclient raises it."""
        try:
            return InferResult(await self.stub.ModelInfer(message, timeout=seconds))
        except grpc.aio.AioRpcError as exc:
            raise InferenceServerException(exc.details(), str(exc.code()), exc.debug_error_string()) from None

    async def close(self) -> None:
        await self.channel.close()
