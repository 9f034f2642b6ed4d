"""Imports what every model.py imports from the kit, as `from X import Y` would: the model folders' own, the
shipped pipeline modules beside the specs (model_repository/*.py, which a pipeline entry loads), and the adapters
named after the folder that the repository builder installs as model.py (kit/adapters/*_model.py) where the
container's profile serves them. The packages copied into the image are the kit and the shipped models' own code
(PACKAGES).

Run in the image at build time (deploy/triton/Dockerfile), so that a kit module that does not run
on the container's Python, or a package missing from requirements.txt, fails the build rather than
the model's load. model.py itself cannot be imported there: it needs the backend's stub.

    python3 check_imports.py MODEL_REPOSITORY_SOURCE [ADAPTER ...]
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

PACKAGES = ("kit", "ocr")


def kit_imports(model_py: Path) -> dict[str, list[str]]:
    """{module of PACKAGES: names imported from it} for one model.py."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(model_py.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] in PACKAGES:
            found.setdefault(node.module, []).extend(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update({a.name: [] for a in node.names if a.name.split(".")[0] in PACKAGES})
    return found


def check(source: Path, adapters: list[Path]) -> list[str]:
    checked = []
    for model_py in [*sorted(source.glob("*/1/model.py")), *sorted(source.glob("*.py")), *adapters]:
        for module, names in kit_imports(model_py).items():
            imported = importlib.import_module(module)
            for name in names:
                if not hasattr(imported, name):
                    importlib.import_module(f"{module}.{name}")  # a submodule, or ImportError
            owner = model_py.parent.parent.name if model_py.name == "model.py" else model_py.stem
            checked.append(f"{owner}: {module}")
    return checked


if __name__ == "__main__":
    print("\n".join(check(Path(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]])))
