"""Profile variants for the tests, written as profile files (kit.control.profiles), and the models as their tasks
make them before any profile places them."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from kit.control.configs import SOURCE
from kit.control.profiles import CANONICAL
from kit.control.repository import plan
from kit.control.served import ServedModel


def profile_data(name: str) -> dict:
    return json.loads((SOURCE / "profiles" / f"{name}.json").read_text())


def variant(folder: Path, data: dict, name: str = "cpu") -> Path:
    """A profile file holding `data`, named `name` (the profile's name is its file's)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


@functools.cache
def canonical() -> dict[str, ServedModel]:
    """Every shipped model as its task makes it, unplaced (planned once: do not change what it holds)."""
    return plan(CANONICAL, specs={})


def configs(profile: str | Path, **kwargs) -> dict:
    """The configs a build of `profile` writes, by model (kit.control.repository.plan's arguments)."""
    return {name: model.written() for name, model in plan(profile, **kwargs).items()}
