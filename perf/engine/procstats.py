"""CPU time and resident memory of a server's whole process tree (server, workers, Python stubs).

A target may be several trees (Triton and the front door in front of it): every function takes one
root pid or several."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePath

import psutil

Pids = int | Iterable[int]


def tree(pids: Pids) -> list[psutil.Process]:
    """Every process of the trees rooted at `pids`."""
    out = []
    for pid in [pids] if isinstance(pids, int) else pids:
        try:
            root = psutil.Process(pid)
            out += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return out


def role(process: psutil.Process) -> str:
    """What a member of a server's tree does: the model a Triton Python-backend stub serves (its
    command names `<repository>/<model>/<version>/model.py`), the module a Python process runs
    (`python -m door`, `-m uvicorn`; a process it spawned counts as it), else its executable's name."""
    args = process.cmdline()
    if "--multiprocessing-fork" in args:  # a worker spawned by its parent (uvicorn's, the door's): the parent's role
        return role(process.parent())
    for arg in args:
        parts = PurePath(arg).parts
        if len(parts) >= 3 and parts[-1] == "model.py":
            return parts[-3]
    if "-m" in args[:-1]:
        return args[args.index("-m") + 1]
    return process.name()


def cpu_seconds_by_role(pids: Pids) -> dict[str, float]:
    """The tree's CPU seconds by `role`: where a server's cycles go (the model, the stubs around it, the server)."""
    total: dict[str, float] = {}
    for process in tree(pids):
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        try:
            name = role(process)
        except psutil.Error:  # a zombie's command is gone, its CPU seconds are not
            name = "unknown"
        total[name] = total.get(name, 0.0) + times.user + times.system
    return total


def cpu_seconds(pids: Pids) -> float:
    return sum(cpu_seconds_by_role(pids).values())


def rss_bytes(pids: Pids) -> int:
    return sum(rss_bytes_by_role(pids).values())


def rss_bytes_by_role(pids: Pids) -> dict[str, int]:
    """The tree's resident memory by `role` (a model's stubs together)."""
    total: dict[str, int] = {}
    for process in tree(pids):
        try:
            rss, name = process.memory_info().rss, role(process)
        except psutil.Error:  # gone, or a zombie whose command is gone: it holds no memory
            continue
        total[name] = total.get(name, 0) + rss
    return total


def peak_rss_bytes(pids: Pids) -> int:
    """The tree's peak resident memory: each process's high-water mark (VmHWM), summed. Read once, after a window,
    so that no sampler thread runs beside the load (its CPU would count as the client's)."""
    total = 0
    for process in tree(pids):
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:  # gone since the tree was listed
            continue
        total += next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return total
