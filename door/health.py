"""Readiness that tells the truth: Triton ready, every routed model ready, and no Python stub dead.

Triton 24.06+ keeps answering ready while a model instance whose stub died fails every request it is
given, so Triton's word alone is not enough: the door also reads the server's stubs in /proc (StubBook). It looks
only at the tritonserver that serves its gRPC port (by the server's command line), so other servers on the machine do
not count; it sees it where it shares the process namespace with Triton (`make serve`; `pid: service:triton` in compose;
`shareProcessNamespace` in the pod). Where it cannot see that server, the answer says so
(`stubs_visible: false`) instead of claiming the stubs are alive. Where a served text model carries a
golden set, readiness also needs the canary's last verdict to be a pass (door.canary); `canary` is
null where there is none.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from starlette.concurrency import run_in_threadpool

from door.canary import Canary
from door.upstream import Upstream
from kit.server.healthcheck import STUB_COMM, process_stat, stub_instance, unreplaced, version_of

DEFAULT_GRPC_PORT = "8001"  # Triton's, when its command line names none


def grpc_port(args: list[str]) -> str:
    for i, arg in enumerate(args):
        if arg.startswith("--grpc-port="):
            return arg.split("=", 1)[1]
        if arg == "--grpc-port" and i + 1 < len(args):
            return args[i + 1]
    return DEFAULT_GRPC_PORT


@dataclass(frozen=True)
class Seen:
    """A stub the door saw alive: its command line, which a zombie's /proc no longer shows, names its version."""

    pid: int
    ticks: int  # its start, in clock ticks: a later process may reuse the pid
    model_py: str
    instance: str

    def key(self) -> tuple[str, str]:
        return self.model_py, self.instance

    def started(self) -> int:
        return self.ticks


class StubBook:
    """The stubs of the server on the door's gRPC port, remembered from each look while they live. A stub that has
    ended since (a zombie, or reaped by Triton) with nothing in its place is dead where its version still serves, as
    the supervisor judges (kit.server.healthcheck.unreplaced): a stub of a version that a failed deploy unloaded, left
    a zombie by Triton, is no instance of the serving model (seen: a door not ready for the rest of a chaos run while
    every request was answered right). A zombie the door never saw alive counts as dead: nothing says which it was."""

    def __init__(self, port: str, proc: Path = Path("/proc")):
        self.port, self.proc = port, proc
        self.seen: dict[int, Seen] = {}  # by pid
        self.settled: set[tuple[int, int]] = set()  # (pid, ticks) of stubs whose end is no death: never judged again
        self.lock = threading.RLock()  # readiness questions may come at once, each looking from a worker thread

    def look(self) -> tuple[list[Seen], list[int], bool]:
        """(the stubs seen alive that have ended with nothing in their place, the zombies never seen alive, whether
        the server could be seen at all)."""
        stats = {int(p.parent.name): s for p in self.proc.glob("[0-9]*/stat") if (s := process_stat(p))}
        servers = {
            pid
            for pid, st in stats.items()
            if st[0] == "tritonserver" and grpc_port(command_line(self.proc / str(pid))) == self.port
        }
        stubs = {(pid, st[3]): st[1] for pid, st in stats.items() if st[0] == STUB_COMM and st[2] in servers}
        with self.lock:
            self.settled &= stubs.keys()
            unknown = []
            for (pid, ticks), state in stubs.items():
                if (pid, ticks) in self.settled or (pid in self.seen and self.seen[pid].ticks == ticks):
                    continue
                if state == "Z":
                    unknown.append(pid)
                    continue
                args = command_line(self.proc / str(pid))
                if named := stub_instance(args):
                    self.seen[pid] = Seen(pid, ticks, *named)
                elif args:  # the stub that completes a config (a stub just forked shows its command line later)
                    self.settled.add((pid, ticks))
            alive = [s for s in self.seen.values() if stubs.get((s.pid, s.ticks), "Z") != "Z"]
            ended = [s for s in self.seen.values() if s not in alive]
            for stub in set(ended) - set(unreplaced(ended, alive, Seen.key, Seen.started)):
                self.settle(stub)
            return [s for s in ended if s.pid in self.seen], sorted(unknown), bool(servers)

    def settle(self, stub: Seen) -> None:
        """A stub whose end was no death: a reload replaced it, or an unload ended its version."""
        with self.lock:
            self.seen.pop(stub.pid, None)
            self.settled.add((stub.pid, stub.ticks))


def command_line(folder: Path) -> list[str]:
    try:
        return (folder / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


async def readiness(upstream: Upstream, canary: Canary | None, book: StubBook) -> dict:
    models = await upstream.readiness()
    server = models.pop("server")
    ended, dead, visible = await run_in_threadpool(book.look)
    for stub in ended:
        model, version = version_of(stub.model_py) or ("", "")
        if await upstream.version_ready(model, version) is False:
            book.settle(stub)
        else:  # serving, or not answered: a dead stub forgotten now would never be found again
            dead.append(stub.pid)
    return {
        "ready": server and all(models.values()) and not dead and (canary is None or canary.ok),
        "triton": server,
        "models": models,
        "dead_stubs": sorted(dead),
        "stubs_visible": visible,
        "canary": canary and canary.status(),
    }
