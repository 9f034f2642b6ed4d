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
from pathlib import Path

STUB_COMM = "triton_python_b"  # /proc truncates triton_python_backend_stub to 15 characters


def process_stat(stat: Path) -> tuple[str, str, int] | None:
    """(command name, state, parent pid) of one /proc/<pid>/stat, or None if it vanished."""
    try:
        text = stat.read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    state, ppid = text[text.rindex(")") + 2 :].split()[:2]
    return comm, state, int(ppid)


def dead_stubs(server_pid: int | None = None, proc: Path = Path("/proc")) -> list[int]:
    """Pids of zombie stubs whose parent is `server_pid` (or any tritonserver when None)."""
    stats = {int(p.parent.name): s for p in proc.glob("[0-9]*/stat") if (s := process_stat(p))}
    servers = {server_pid} if server_pid else {pid for pid, (comm, _, _) in stats.items() if comm == "tritonserver"}
    return sorted(pid for pid, (comm, state, ppid) in stats.items() if comm == STUB_COMM and state == "Z" and ppid in servers)


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
