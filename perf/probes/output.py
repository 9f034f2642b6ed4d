"""What every quick benchmark does with its report: print it, and save it where asked."""

from __future__ import annotations

import json
from pathlib import Path


def emit(report: dict, out: Path | None) -> None:
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
