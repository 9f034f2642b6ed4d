"""A checkpoint spec's export (the text and image tasks): a program of the export virtualenv, which has PyTorch, run
at `kit add` and again at build time whenever the checkpoint, or a setting of the spec the export depends on, changed
since. It checks what it exports against PyTorch and writes export.json beside its files, in artifacts/models/NAME.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.control.configs import ARTIFACTS, REPO_ROOT
from kit.control.specs import ModelSpec

EXPORTS = ARTIFACTS / "models"
EXPORT_PYTHON_ENV = "KIT_EXPORT_PYTHON"  # the Python with PyTorch that runs exports (default: the export venv's)
STAMP = ".source"  # what an export was made from: the source, its files' sizes and times, the settings it depends on


@dataclass(frozen=True)
class Exporter:
    """How a task exports a checkpoint: the program (`python -m module --model SOURCE --out DIR ...options`), the
    spec's settings it depends on, and what the source must be, in words, for the error where it is not."""

    module: str
    options: Callable[[ModelSpec], list[str]]
    depends: Callable[[ModelSpec], dict]
    what: str


def export_dir(spec: ModelSpec) -> Path:
    """Where the spec's export is: artifacts/models/NAME, or a shipped spec's folder in artifacts/ (`make export`'s)."""
    return spec.source_path if spec.shipped else EXPORTS / spec.name


def stamp(spec: ModelSpec, exporter: Exporter) -> dict:
    """What the export depends on: a hub id as written; a folder by its files' sizes and modification times."""
    if spec.hub_id:
        source = spec.source
    else:
        files = sorted(p for p in spec.source_path.rglob("*") if p.is_file())
        digest = hashlib.sha256()
        for path in files:
            info = path.stat()
            digest.update(f"{path.relative_to(spec.source_path)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
        source = f"{spec.source_path}#{digest.hexdigest()}"
    return {"source": source} | exporter.depends(spec)


def exported(spec: ModelSpec, exporter: Exporter) -> dict | None:
    """export.json of the spec's export where it is the export of the spec's source as it is now; else None."""
    folder = export_dir(spec)
    try:
        if json.loads((folder / STAMP).read_text()) != stamp(spec, exporter):
            return None
        return json.loads((folder / "export.json").read_text())
    except (OSError, ValueError):
        return None


def export_python() -> str:
    """The export runs where PyTorch is: $KIT_EXPORT_PYTHON, else the export virtualenv, else this Python."""
    chosen = os.environ.get(EXPORT_PYTHON_ENV)
    venv = REPO_ROOT / ".venv" / "export" / "bin" / "python"
    return chosen or (str(venv) if venv.exists() else sys.executable)


def export(spec: ModelSpec, exporter: Exporter) -> dict:
    """The spec's export, made now if it is missing or stale (its progress on stderr); SpecError when it fails."""
    meta = exported(spec, exporter)
    if meta is not None:
        return meta
    folder = export_dir(spec)
    source = spec.source if spec.hub_id else str(spec.source_path)
    command = [export_python(), "-m", exporter.module, "--model", source, "--out", str(folder), *exporter.options(spec)]
    print(f"exporting {spec.name} from {source} into {folder} (checked against PyTorch)", file=sys.stderr, flush=True)
    (folder / STAMP).unlink(missing_ok=True)
    last = deque(maxlen=1)  # the export's last words: its error where it fails
    with subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as running:
        for line in running.stdout:  # its steps, as they come: the progress of a long export
            sys.stderr.write(line)
            if line.strip():
                last.append(line.strip())
    if running.returncode != 0:
        reason = last[0].removeprefix("error: ") if last else f"exit status {running.returncode}"
        raise spec.error("source", f"cannot be exported as {exporter.what} ({reason})", "see docs/MODELS.md")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STAMP).write_text(json.dumps(stamp(spec, exporter)) + "\n")
    return json.loads((folder / "export.json").read_text())
