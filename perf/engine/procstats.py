"""CPU time and resident memory of a server's whole process tree (server, workers, Python stubs).

A target may be several trees (Triton and the front door in front of it): every function takes one
root pid or several."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import PurePath

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


class TreeMonitor:
    """Samples a tree while a load runs: its CPU seconds over the run (in all and by role) and its peak
    resident memory."""

    def __init__(self, pids: Pids, interval: float = 0.5):
        self.pids = pids
        self.interval = interval
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_rss = max(self.peak_rss, rss_bytes(self.pids))
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeMonitor:
        self._roles_start = cpu_seconds_by_role(self.pids)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_rss = max(self.peak_rss, rss_bytes(self.pids))
        used = {k: v - self._roles_start.get(k, 0.0) for k, v in cpu_seconds_by_role(self.pids).items()}
        self.cpu_s_by_role = dict(sorted(used.items(), key=lambda kv: -kv[1]))
        self.cpu_s = sum(used.values())


def idle_detector(pids: Pids, seconds: float) -> Callable[[], bool]:
    """True once the trees have used no CPU for `seconds` (no request of a run is being served)."""
    last = [cpu_seconds(pids), time.monotonic()]

    def stalled() -> bool:
        now = cpu_seconds(pids)
        if now - last[0] > 0.05:
            last[:] = [now, time.monotonic()]
        return time.monotonic() - last[1] > seconds

    return stalled
