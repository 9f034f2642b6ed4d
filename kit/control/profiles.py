"""Deployment profiles (`model_repository/profiles/<name>.json`, or any such file): where and how each model runs on
one target, by the role the model plays, with overrides per model; never what a model computes.

    {"target": "cpu",
     "roles": {"text-graph": {"graph": "model.cpu.onnx", "instances": 2, "threads": 1, "max_batch_size": 8}},
     "models": {"radar_classifier": {"preferred_batch_size": [8], "max_queue_delay_microseconds": 50000}}}

A model's placement is its role's (ROLES: a task names the role of each model it plans), less what its spec gives,
then the spec's own settings, then the profile's entry for the model by name. A role's batch cap keeps only the
config's preferred batch sizes it admits; an entry by name is held to the sizes it leaves. Each target's applier
(kit.control.embedded for the embedded server, on a CPU or a GPU host; kit.control.container for Triton's container)
takes its own keys and the common ones (kit.control.placement) and refuses any other, so a misspelt setting fails the
build; docs/MODELS.md (A profile's keys) lists them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control import container, embedded
from kit.control.configs import REPO_ROOT, SOURCE, RepositoryError
from kit.control.served import ServedModel

# Each target's applier: the embedded server on a CPU or GPU host, Triton's container on GPUs; and `canonical`, which
# places nothing: the models as their tasks make them, for what needs those alone (`kit add`'s check, tools).
TARGETS = {
    "cpu": embedded.place,
    "gpu-embedded": embedded.place,
    "gpu": container.place,
    "canonical": lambda model, placement, target, lengths: model,
}
# The roles a task's models play (kit.control.tasks), each placed alike whichever spec brings the model.
ROLES = (
    "onnx-graph",
    "text-entry",
    "text-texts",
    "text-graph",
    "image-entry",
    "image-pixels",
    "image-graph",
    "pixels-entry",
    "pixels-backbone",
    "pipeline-entry",
    "pipeline-network",
)


@dataclass(frozen=True)
class Profile:
    """A profile as read: its target, its placement of each role, its entries by model name, and the file's folder
    (where a runner of its own is, relative to it)."""

    name: str
    target: str
    roles: dict[str, dict] = field(default_factory=dict)
    models: dict[str, dict] = field(default_factory=dict)
    folder: Path = SOURCE / "profiles"

    def placement(self, role: str, name: str, config: mc.ModelConfig, given: dict | None = None) -> dict:
        """The placement of model `name` playing `role`, whose canonical config is `config`; `given`: what its spec
        sets itself (which the role's placement leaves alone)."""
        given, roles, own = given or {}, self.roles.get(role, {}), self.models.get(name, {})
        placed = {key: value for key, value in roles.items() if key not in given and key != "parameters"}
        if "max_batch_size" in placed and "preferred_batch_size" not in given | own:
            cap = int(placed["max_batch_size"])
            placed["preferred_batch_size"] = [b for b in config.dynamic_batching.preferred_batch_size if b <= cap]
        parameters = roles.get("parameters", {}) | given.get("parameters", {}) | own.get("parameters", {})
        return placed | given | own | ({"parameters": parameters} if parameters else {})

    def place(self, role: str, model: ServedModel, given: dict | None = None, lengths: Sequence[int] = ()) -> ServedModel:
        """`model` placed on this profile's target as its role and name say; `lengths`: those its callers pad its
        free axis to (a text graph's buckets), for a runner that warms up."""
        placement = self.placement(role, model.name, model.config, given)
        if "files" in placement:  # a profile's own files, beside it
            placement["files"] = {name: self.folder / path for name, path in placement["files"].items()}
        if "model_py" in placement:
            placement["model_py"] = self.folder / placement["model_py"]
        return TARGETS[self.target](replace(model, role=role), placement, self.target, lengths)


def load_profile(name: str | Path, source: Path = SOURCE) -> Profile:
    """The profile `name` of the source's profiles, or the profile file at that path."""
    path = Path(name) if str(name).endswith(".json") else source / "profiles" / f"{name}.json"
    path = (path if path.is_absolute() or path.exists() else REPO_ROOT / path).resolve()
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (source / "profiles").glob("*.json")))
        raise RepositoryError(f"no profile {name!r} (known: {known})")
    data = json.loads(path.read_text())
    unknown = sorted(set(data.get("roles", {})) - set(ROLES))
    if unknown:
        raise RepositoryError(f"{path}: unknown roles {unknown} (the roles are {', '.join(ROLES)})")
    target = data.get("target", path.stem)
    if target not in TARGETS:
        raise RepositoryError(f"{path}: no target {target!r} (the targets are {', '.join(TARGETS)})")
    return Profile(path.stem, target, data.get("roles", {}), data.get("models", {}), path.parent)


CANONICAL = Profile("canonical", "canonical")
