"""What every target places alike (kit.control.profiles): the batcher and queue settings common to all targets,
ensembles, and the check that refuses keys a target does not know."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import RepositoryError, copy_config

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
        "files",
    }
)


def check_keys(config: mc.ModelConfig, settings: dict, known: frozenset[str], target: str) -> None:
    unknown = set(settings) - known
    if unknown:
        raise RepositoryError(f"{config.name}: unknown {target} settings {sorted(unknown)} (known: {sorted(known)})")


def apply_ensemble(config: mc.ModelConfig, settings: dict) -> mc.ModelConfig:
    """An ensemble's only setting: its parameters, which its task reads."""
    check_keys(config, settings, frozenset({"parameters"}), "ensemble")
    return copy_config(config)


def apply_common(config: mc.ModelConfig, settings: dict) -> None:
    """The common settings, on a copy that the target's applier already placed (`parameters` are the task's)."""
    if "max_batch_size" in settings:
        cap = int(settings["max_batch_size"])
        if not 1 <= cap <= config.max_batch_size:
            committed = config.max_batch_size
            raise RepositoryError(f"{config.name}: max_batch_size {cap} is outside 1 .. {committed}, the committed one")
        config.max_batch_size = cap
    batching = COMMON - {"instances", "max_batch_size", "parameters", "files"}
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
    too_large = [b for b in config.dynamic_batching.preferred_batch_size if b > config.max_batch_size]
    if too_large:
        raise RepositoryError(f"{config.name}: preferred batch sizes {too_large} exceed max_batch_size {config.max_batch_size}")
