"""The committed model sources: where they are, Triton's own protobuf schema to read and write them, and random inputs
that fit a config's tensors (a graph's check, a benchmark's requests).

Every config is parsed and written through `model_config_pb2`, so a built repository cannot hold a
config that Triton would reject as malformed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import triton_to_np_dtype

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = REPO_ROOT / "model_repository"
ARTIFACTS = REPO_ROOT / "artifacts"
TEMPLATES = Path(__file__).resolve().parent / "templates"  # the configs a task's models start from, by task
FREE_DIM = 3  # what a dynamic non-batch axis of example_inputs measures


class RepositoryError(Exception):
    """The repository cannot be built: a source, profile or artifact is missing or invalid."""


def parse_config(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())


def render_config(config: mc.ModelConfig) -> str:
    return text_format.MessageToString(config)


def copy_config(config: mc.ModelConfig) -> mc.ModelConfig:
    return mc.ModelConfig.FromString(config.SerializeToString())


def template(path: str, name: str) -> mc.ModelConfig:
    """The template config at TEMPLATES/`path`.pbtxt, named `name`."""
    config = parse_config((TEMPLATES / f"{path}.pbtxt").read_text())
    config.name = name
    return config


def wire_type(config_type: str) -> str:
    """A config's data type (TYPE_FP32) as the inference protocol names it (FP32; TYPE_STRING is BYTES)."""
    return "BYTES" if config_type == "TYPE_STRING" else config_type.removeprefix("TYPE_")


def config_type(wire: str) -> int:
    """The inverse of wire_type: a protocol data type (FP32, BYTES) as the config's enum value."""
    return mc.DataType.Value("TYPE_STRING" if wire == "BYTES" else f"TYPE_{wire}")


def numpy_type(data_type: int) -> type:
    """The numpy type of a config tensor's data type (np.object_ for strings)."""
    return triton_to_np_dtype(wire_type(mc.DataType.Name(data_type)))


def parameters(config: mc.ModelConfig) -> dict[str, str]:
    return {key: value.string_value for key, value in config.parameters.items()}


def set_parameter(config: mc.ModelConfig, key: str, value) -> None:
    config.parameters[key].string_value = str(value)


def set_parameters(config: mc.ModelConfig, parameters: dict) -> None:
    for key, value in parameters.items():
        set_parameter(config, key, value)


def instance_count(config: mc.ModelConfig) -> int:
    """How many instances Triton runs of `config` (a group naming GPUs has `count` on each; none: one)."""
    return sum(group.count * max(1, len(group.gpus)) for group in config.instance_group) or 1


def example_inputs(config: mc.ModelConfig, rows: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of `rows` rows for the config's tensors (whole numbers 0-9 for integer types, short byte strings
    for BYTES)."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for tensor in config.input:
        shape = [rows] * (config.max_batch_size > 0) + [FREE_DIM if d < 0 else d for d in tensor.dims]
        dtype = numpy_type(tensor.data_type)
        if dtype == np.object_:
            arrays[tensor.name] = np.array([f"text {i}".encode() for i in range(int(np.prod(shape)))], object).reshape(shape)
        elif np.issubdtype(dtype, np.floating):
            arrays[tensor.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            arrays[tensor.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            arrays[tensor.name] = rng.integers(0, 10, shape).astype(dtype)
    return arrays
