"""Readiness that tells the truth: Triton ready, every routed model ready, and no Python stub dead.

Triton 24.06+ keeps answering ready while a model instance whose stub died fails every request it is
given, so Triton's word alone is not enough. A dead stub stays a zombie child of tritonserver, which
kit.server.healthcheck finds in /proc. The door looks only at the tritonserver that serves its gRPC
port (by the server's command line), so other servers on the machine do not count; it sees it where it
shares the process namespace with Triton (`make serve`; `pid: service:triton` in compose;
`shareProcessNamespace` in the pod). Where it cannot see that server, the answer says so
(`stubs_visible: false`) instead of claiming the stubs are alive. Where a served text model carries a
golden set, readiness also needs the canary's last verdict to be a pass (door.canary); `canary` is
null where there is none.
"""

from __future__ import annotations

from pathlib import Path

from starlette.concurrency import run_in_threadpool

from door.canary import Canary
from door.upstream import Upstream
from kit.server.healthcheck import dead_stubs, process_stat

DEFAULT_GRPC_PORT = "8001"  # Triton's, when its command line names none


def grpc_port(args: list[str]) -> str:
    for i, arg in enumerate(args):
        if arg.startswith("--grpc-port="):
            return arg.split("=", 1)[1]
        if arg == "--grpc-port" and i + 1 < len(args):
            return args[i + 1]
    return DEFAULT_GRPC_PORT


def servers_on(port: str, proc: Path = Path("/proc")) -> list[int]:
    """Pids of the tritonserver processes serving gRPC on `port`."""
    found = []
    for stat in proc.glob("[0-9]*/stat"):
        info = process_stat(stat)
        if info is None or info[0] != "tritonserver":
            continue
        try:
            args = (stat.parent / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if grpc_port(args) == port:
            found.append(int(stat.parent.name))
    return found


def stub_check(port: str, proc: Path = Path("/proc")) -> tuple[list[int], bool]:
    """Dead stubs of the server on `port`, and whether that server could be seen at all."""
    servers = servers_on(port, proc)
    return [pid for server in servers for pid in dead_stubs(server, proc)], bool(servers)


async def readiness(upstream: Upstream, canary: Canary | None) -> dict:
    models = await upstream.readiness()
    server = models.pop("server")
    dead, visible = await run_in_threadpool(stub_check, upstream.settings.triton.rsplit(":", 1)[-1])
    return {
        "ready": server and all(models.values()) and not dead and (canary is None or canary.ok),
        "triton": server,
        "models": models,
        "dead_stubs": dead,
        "stubs_visible": visible,
        "canary": canary and canary.status(),
    }
