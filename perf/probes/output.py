"""What every quick benchmark does with its report: name the command that made it, print it, and save
it where asked."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path


def command_line(module: str, argv: list[str] | None) -> str:
    """How a probe was run (its `main`'s argv, or the process's), quoted so that it can be pasted back."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def emit(report: dict, out: Path | None) -> None:
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
