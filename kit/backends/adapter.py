"""What every Python-backend model of the kit reads the same way at `initialize`.

Plain Python (no `triton_python_backend_utils`), so that the container build can import it outside
a stub (deploy/triton/check_imports.py)."""

from __future__ import annotations

import json
from pathlib import Path


def model_settings(args: dict) -> tuple[dict, dict[str, str], Path]:
    """The model's config, its string parameters and its version folder, from initialize's `args`."""
    config = json.loads(args["model_config"])
    params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
    return config, params, Path(args["model_repository"]) / args["model_version"]
