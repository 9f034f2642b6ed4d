"""A served model, as a task plans it and a target places it: what the repository builder writes into one model's
folder of a Triton model repository."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.adapters.settings import Settings
from kit.control.configs import copy_config, set_parameters

ADAPTERS = Path(__file__).resolve().parents[1] / "adapters"


@dataclass(frozen=True)
class ServedModel:
    """One model: its name; its config, placed; the typed settings its model.py reads (None for a native backend or
    an ensemble without any), which the builder writes into the config's parameters; the model.py its version folder
    runs (None: Triton's own backend or an ensemble); its files, by name in the version folder; the models it calls
    (over BLS), which the build must hold and whose queues its own bounds where they have none; and the role it was
    placed as."""

    name: str
    config: mc.ModelConfig
    settings: Settings | None = None
    adapter: Path | None = None
    files: dict[str, Path] = field(default_factory=dict)
    calls: tuple[str, ...] = ()
    role: str = ""  # the role its profile placed it as (kit.control.profiles.ROLES)

    def written(self) -> mc.ModelConfig:
        """The config with its settings written into its parameters, as Triton, the model and the door read it."""
        config = copy_config(self.config)
        set_parameters(config, self.settings.to_parameters() if self.settings is not None else {})
        return config

    def with_files(self, files: dict[str, Path]) -> ServedModel:
        return replace(self, files=self.files | files)


def adapter(name: str) -> Path:
    """An adapter of kit/adapters, by its module's name."""
    return ADAPTERS / f"{name}.py"
