"""Deployment profiles (`model_repository/profiles/<name>.json`): per-model settings that change
placement, backend and batching of the committed configs, never what a model computes.

Each target has one applier (kit.control.cpu_profile, gpu_profile, gpu_embedded_profile) that
accepts its own settings plus the common ones below and refuses any other key, so a misspelt
setting fails the build instead of being ignored.

Common settings, on every target:

    instances                        instances (per GPU for GPU models)
    max_batch_size                   a lower cap on the rows of one execution (1 .. the committed
                                     max_batch_size): with several single-thread instances on CPU, small
                                     executions keep every instance busy instead of one taking the queue
    max_queue_delay_microseconds     the dynamic batcher's delay
    preferred_batch_size             its preferred batch sizes
    default_timeout_microseconds     how long a request may wait in the queue before it is refused
    queue_policy                     false: no queue bound or wait limit of Triton's own, for a model whose
                                     only caller bounds what it sends (Triton 2.51's batcher does not
                                     gather the next batch during an execution while a model has a policy)
    ragged_batch                     true: one execution may take waiting requests of different shapes
                                     (a Python-backend model that batches itself: resnet50, the ONNX and
                                     PyTorch runners); false: Triton closes a batch at the first shape change
    parameters                       config parameters to set (e.g. RADAR's bucket_count)

An ensemble (`radar`) has no instances and no batcher of its own: Triton's ensemble scheduler runs its
steps on the models they name. It takes `parameters` alone, on every target (apply_ensemble).
"""

from __future__ import annotations

import json
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import SOURCE, RepositoryError, copy_config, set_parameter

COMMON = frozenset(
    {
        "instances",
        "max_batch_size",
        "max_queue_delay_microseconds",
        "preferred_batch_size",
        "default_timeout_microseconds",
        "queue_policy",
        "ragged_batch",
        "parameters",
    }
)


def load_profile(name: str, source: Path = SOURCE) -> dict:
    path = source / "profiles" / f"{name}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (source / "profiles").glob("*.json")))
        raise RepositoryError(f"no profile {name!r} (known: {known})")
    return json.loads(path.read_text())


def check_keys(config: mc.ModelConfig, settings: dict, known: frozenset[str], target: str) -> None:
    unknown = set(settings) - known
    if unknown:
        raise RepositoryError(f"{config.name}: unknown {target} settings {sorted(unknown)} (known: {sorted(known)})")


def apply_ensemble(config: mc.ModelConfig, settings: dict) -> mc.ModelConfig:
    """An ensemble's only setting: its parameters (the ones its steps' models inherit, kit.control.derived)."""
    check_keys(config, settings, frozenset({"parameters"}), "ensemble")
    config = copy_config(config)
    for key, value in settings.get("parameters", {}).items():
        set_parameter(config, key, value)
    return config


def apply_common(config: mc.ModelConfig, settings: dict) -> None:
    """The common settings, on a copy that the target's applier already placed."""
    if "max_batch_size" in settings:
        cap = int(settings["max_batch_size"])
        if not 1 <= cap <= config.max_batch_size:
            committed = config.max_batch_size
            raise RepositoryError(f"{config.name}: max_batch_size {cap} is outside 1 .. {committed}, the committed one")
        config.max_batch_size = cap
    batching = COMMON - {"instances", "max_batch_size", "parameters"}
    if any(key in settings for key in batching) and not config.HasField("dynamic_batching"):
        raise RepositoryError(f"{config.name}: batching settings need the config's dynamic_batching")
    if "max_queue_delay_microseconds" in settings:
        config.dynamic_batching.max_queue_delay_microseconds = int(settings["max_queue_delay_microseconds"])
    if "preferred_batch_size" in settings:
        config.dynamic_batching.preferred_batch_size[:] = [int(b) for b in settings["preferred_batch_size"]]
    if "default_timeout_microseconds" in settings:
        config.dynamic_batching.default_queue_policy.default_timeout_microseconds = int(settings["default_timeout_microseconds"])
    if not isinstance(settings.get("queue_policy", False), bool):
        raise RepositoryError(f"{config.name}: queue_policy is true or false, not {settings['queue_policy']!r}")
    if settings.get("queue_policy") is False:
        if "default_timeout_microseconds" in settings:
            raise RepositoryError(f"{config.name}: default_timeout_microseconds needs a queue_policy")
        config.dynamic_batching.ClearField("default_queue_policy")
    if "ragged_batch" in settings:
        # Only a Python-backend model can take a ragged batch: the native backends concatenate inputs.
        if settings["ragged_batch"] and (config.backend != "python" or config.max_batch_size < 1):
            raise RepositoryError(f"{config.name}: ragged_batch needs a batching Python-backend model (the CPU ONNX runner)")
        for tensor in config.input:
            tensor.allow_ragged_batch = bool(settings["ragged_batch"])
    for key, value in settings.get("parameters", {}).items():
        set_parameter(config, key, value)
    too_large = [b for b in config.dynamic_batching.preferred_batch_size if b > config.max_batch_size]
    if too_large:
        raise RepositoryError(f"{config.name}: preferred batch sizes {too_large} exceed max_batch_size {config.max_batch_size}")
