"""Shared test settings: where the exported artifacts are (built by `make export`)."""

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO_ROOT / "artifacts"
EXPORT_PYTHON = REPO_ROOT / ".venv" / "export" / "bin" / "python"


@pytest.fixture(scope="session")
def radar_artifacts() -> Path:
    path = ARTIFACTS / "radar"
    if not (path / "export.json").is_file():
        pytest.fail(f"{path} has no exported model: run `make export` (make test does it)")
    return path
