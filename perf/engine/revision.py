"""Which code a result came from: the commit a git working tree is at, marked `+changes` where tracked files other
than results differ from it, so that a run of uncommitted code never passes for a run of its commit."""

from __future__ import annotations

import subprocess
from pathlib import Path


def tree_commit(root: Path) -> str:
    """HEAD's short hash, with `+changes` when the tree differs from it; raises where git or the checkout is missing."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=30).stdout.strip()

    # A sweep's own results (perf/results) change as it runs: they are its output, not the code that ran.
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)perf/results")
    head = git("rev-parse", "--short", "HEAD")
    return head + ("+changes" if changed else "")
