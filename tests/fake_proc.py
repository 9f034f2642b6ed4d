"""A fake /proc for the health checks' tests: a process is a folder with its stat line and command line."""

from __future__ import annotations

from pathlib import Path


def fake_process(proc: Path, pid: int, comm: str, state: str, ppid: int, args: list[str] = (), ticks: int = 1) -> None:
    """One process; `ticks` is its start time (the stat line's 22nd field), which tells a reused pid apart."""
    folder = proc / str(pid)
    folder.mkdir(exist_ok=True)
    (folder / "stat").write_text(f"{pid} ({comm}) {state} {ppid} {' '.join(['0'] * 17)} {ticks} 0 0\n")
    (folder / "cmdline").write_bytes("\0".join(args).encode() + b"\0" if args else b"")
