"""The kit as `make serve` runs it, for a chaos run: the CPU profile's repository built with the run's models (RADAR,
resnet50 and a user's specs), tritonserver on free ports under the kit's Supervisor, and the front door as a process
of its own in front of it. It keeps what the run judges afterwards: the supervisor's events, and every Python stub
and `/dev/shm` region the server has had, so that nothing of a dead stub is left behind unseen."""

from __future__ import annotations

import threading
import time
import traceback
from pathlib import Path

import psutil

from kit.control.configs import ARTIFACTS
from kit.control.repository import build
from kit.control.specs import ModelSpec
from kit.server.runtime import ServerOptions, Stub, Supervisor, TritonServer, free_port
from kit.server.serve import Door

PROFILE = "cpu"
SHIPPED = ("radar", "radar_texts", "radar_classifier", "resnet50", "resnet50_backbone")
# The supervisor gives up after more than 5 restarts in 10 minutes, so that a server that cannot stay up fails
# loudly; a chaos run restarts it on purpose every minute or two, so it may restart as often as the run asks.
RESTARTS = 1000


class ServedKit:
    """Start with `start()`, stop with `stop()`; `events` are the supervisor's lines, by monotonic time."""

    def __init__(self, work: Path, specs: dict[str, ModelSpec], artifacts: Path = ARTIFACTS, poll: float = 1.0):
        self.work, self.specs, self.artifacts, self.poll = work, specs, artifacts, poll
        self.events: list[tuple[float, str]] = []
        self.stubs: dict[int, Stub] = {}  # every stub seen, by pid
        self.lifetimes: dict[int, list[float]] = {}  # each one's first sight and last sight alive, by pid
        self.failure: str | None = None  # why the supervisor stopped, if it did
        self.server: TritonServer | None = None
        self.door: Door | None = None
        self._stop = threading.Event()
        self._supervising: threading.Thread | None = None

    @property
    def repository(self) -> Path:
        return self.work / "repository"

    def start(self) -> ServedKit:
        build(PROFILE, self.repository, self.artifacts, specs=self.specs, models=(*SHIPPED, *self.specs))
        self.server = TritonServer(ServerOptions.on_free_ports(self.repository), log_path=self.work / "server.log")
        self.server.start()
        self.started = time.monotonic()
        self.seen()
        supervisor = Supervisor(self.server, poll=self.poll, max_restarts=RESTARTS, log=self.record)
        self._supervising = threading.Thread(target=self.supervise, args=(supervisor,), name="supervisor", daemon=True)
        self._supervising.start()
        self.door = Door(self.server.options.grpc_url, "127.0.0.1", free_port(), None, log_path=self.work / "door.log")
        self.door.start()
        return self

    def supervise(self, supervisor: Supervisor) -> None:
        try:
            supervisor.run(self._stop)
        except Exception as exc:  # ServerError when restarts stop helping; anything else is a bug of the kit's
            self.failure = f"{type(exc).__name__}: {exc}"
            self.record(f"supervisor stopped: {self.failure}")
            traceback.print_exc()

    def record(self, line: str) -> None:
        self.events.append((time.monotonic(), line))

    def seen(self) -> list[Stub]:
        """The server's stubs now, each also kept in `stubs`."""
        current = self.server.current_stubs()
        now = time.monotonic()
        for stub in current:
            self.stubs.setdefault(stub.process.pid, stub)
            seen = self.lifetimes.setdefault(stub.process.pid, [now, now])
            if stub.alive():
                seen[1] = now
        return [stub for stub in current if stub.alive()]

    def describe(self) -> list[str]:
        """The server's stubs as its supervisor knows them, and those running now: what a verdict that found the kit
        not ready at the end needs to say why."""
        known = [
            f"known: {s.instance} of {s.model_py} pid {s.process.pid} alive {s.alive()} ended {s.ended_at}"
            for s in self.server.stubs
        ]
        return known + [f"running: {s.instance} of {s.model_py} pid {s.process.pid}" for s in self.seen()]

    def regions(self) -> set[str]:
        return {stub.shm_region for stub in self.stubs.values() if stub.shm_region}

    def stop(self) -> None:
        self._stop.set()
        if self._supervising is not None:
            self._supervising.join(300)
        if self.door is not None:
            self.door.stop()
        if self.server is not None:
            self.seen()
            self.server.stop()

    def left_behind(self) -> dict[str, list]:
        """After `stop()`: stubs of this run still running, and their `/dev/shm` regions still there."""
        running = [f"{stub.instance} ({pid})" for pid, stub in self.stubs.items() if alive(stub.process)]
        regions = [
            f"{stub.shm_region} ({stub.instance} of {stub.model_py}, pid {pid}, seen alive from {self.at(pid, 0)} to "
            f"{self.at(pid, 1)} s)"
            for pid, stub in self.stubs.items()
            if stub.shm_region and Path("/dev/shm", stub.shm_region).exists()
        ]
        return {"stubs_running": running, "shm_regions": regions}

    def at(self, pid: int, which: int) -> float:
        """A stub's first (0) or last (1) sight alive, in seconds since the first event's clock (the run's start)."""
        return round(self.lifetimes[pid][which] - self.started, 1)


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
