"""A health check that tells the truth: the ready endpoint answers 200 AND no Python stub has died.

    python3 kit/server/healthcheck.py [--url http://127.0.0.1:8000]     # exit 0 healthy, 1 not

Triton 24.06+ does not restart a Python stub that died, and keeps answering ready while every
request routed to that model instance fails. A dead stub stays a zombie child of tritonserver
(Triton does not reap it), which is what this looks for in /proc. Standard library only, so that
it runs as is inside the official Triton container (e.g. as a compose health check).
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path, PurePath
from typing import TypeVar

STUB_NAME = "triton_python_backend_stub"
STUB_COMM = STUB_NAME[:15]  # /proc truncates the command name to 15 characters
Ended = TypeVar("Ended")


def stub_instance(args: list[str]) -> tuple[str, str] | None:
    """(model.py, instance) a Python stub's command line names, e.g. (`<repository>/radar_classifier/1/model.py`,
    `radar_classifier_0_1`); None for any other process, and for the stub that Triton runs when it loads a version to
    complete the config, named as the model (`radar_classifier`), not as an instance: it exits once done, and its end
    is no death (seen: a supervisor that counted it restarted the server mid-deploy)."""
    # argv: stub, model.py, shm region, shm sizes, parent pid, backend dir, ..., instance name, runtime
    if len(args) < 3 or Path(args[0]).name != STUB_NAME:
        return None
    model_py, instance = args[1], args[-2]
    model = version_of(model_py)
    return None if model and instance == model[0] else (model_py, instance)


def version_of(model_py: str) -> tuple[str, str] | None:
    """(model, version) of a stub's `<repository>/<model>/<version>/model.py`."""
    parts = PurePath(model_py).parts
    return (parts[-3], parts[-2]) if len(parts) >= 3 else None


def unreplaced(ended: Iterable[Ended], live: Iterable[Ended], instance: Callable, started: Callable) -> list[Ended]:
    """The ended stubs whose instance no stub started after them has taken: a reload starts a new stub for the same
    instance and version, and only the newer one takes an ended one's place (an older one of the same name still
    running, a reload's old instance not yet gone, would hide a death for good). Such a stub died if its version
    still serves; the supervisor (kit.server.runtime) and the door (door.health) both judge so, each asking Triton."""
    newest: dict = {}
    for stub in live:
        newest[instance(stub)] = max(newest.get(instance(stub), 0.0), started(stub))
    return [stub for stub in ended if newest.get(instance(stub), 0.0) <= started(stub)]


def process_stat(stat: Path) -> tuple[str, str, int, int] | None:
    """(command name, state, parent pid, start time in clock ticks) of one /proc/<pid>/stat, or None if it vanished;
    the start time tells a pid reused by a later process from the one it was."""
    try:
        text = stat.read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return comm, fields[0], int(fields[1]), int(fields[19])


def dead_stubs(server_pid: int | None = None, proc: Path = Path("/proc")) -> list[int]:
    """Pids of zombie stubs whose parent is `server_pid` (or any tritonserver when None)."""
    stats = {int(p.parent.name): s for p in proc.glob("[0-9]*/stat") if (s := process_stat(p))}
    servers = {server_pid} if server_pid else {pid for pid, (comm, *_) in stats.items() if comm == "tritonserver"}
    return sorted(pid for pid, (comm, state, ppid, _) in stats.items() if comm == STUB_COMM and state == "Z" and ppid in servers)


def problems(url: str, server_pid: int | None = None) -> list[str]:
    found = []
    try:
        with urllib.request.urlopen(f"{url}/v2/health/ready", timeout=5) as response:
            if response.status != 200:
                found.append(f"ready endpoint answered {response.status}")
    except (urllib.error.URLError, OSError) as exc:
        found.append(f"ready endpoint: {exc}")
    found += [f"Python stub {pid} died" for pid in dead_stubs(server_pid)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--server-pid", type=int, help="the tritonserver to check (default: every one)")
    args = parser.parse_args(argv)
    found = problems(args.url, args.server_pid)
    for line in found:
        print(f"unhealthy: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
