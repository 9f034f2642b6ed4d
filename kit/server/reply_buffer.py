"""The kernel setting that decides how many HTTP replies Triton can hand over at once without losing any.

Triton 2.51's HTTP frontend (libevhtp) passes each finished reply to its connection's thread through a socket pair
and drops the reply, silently, when that socket's send buffer is full: the client then waits forever. A reply
finishes inside the request's own call whenever an ensemble's step refuses it (a full queue), so a flood of
refusals arrives while that thread is still reading the flood and cannot empty the socket. `radar` and the entry
of every text and image spec are such ensembles. A socket pair's buffer is the kernel's
`net.core.wmem_default`, which is global (not per network namespace) and used by no TCP socket, so raising it
costs nothing until the buffer fills. Measured (python -m perf.probes.ensemble_refusals at commit 34d918d, 4,000
refusals at once over HTTP): 212,992 bytes (the default) answered 312-442 and lost the rest; 1 MiB answered 1,509; 4 MiB all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SETTING = Path("/proc/sys/net/core/wmem_default")
BYTES_PER_REPLY = 690  # kernel memory one queued reply holds in that socket: 212,992 bytes held 312, 1 MiB 1,509
WANTED = 16 * 2**20  # about 24,000 refusals at once: 6 x `make peak`'s flood


def current(setting: Path = SETTING) -> int | None:
    try:
        return int(setting.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def replies_at_once(buffer_bytes: int) -> int:
    return buffer_bytes // BYTES_PER_REPLY


def advice(value: int | None) -> str | None:
    """What to tell the operator when the setting is too low for a flood, else None."""
    if value is None or value >= WANTED:
        return None
    return (
        f"net.core.wmem_default is {value:,} bytes: under a flood of more than about {replies_at_once(value):,} "
        "refusals at once, Triton's HTTP frontend loses replies and those clients wait forever (gRPC and the door "
        f"are not affected). On the host (not per container), as root: sysctl -w net.core.wmem_default={WANTED}"
    )


def raise_setting(setting: Path = SETTING, wanted: int = WANTED) -> str:
    """Raises the setting to `wanted` where this process may (root on the host), before Triton creates its sockets.
    Returns what happened, for the operator."""
    value = current(setting)
    if value is None:
        return f"{setting} is not readable here; not changed"
    if value >= wanted:
        return f"net.core.wmem_default is {value:,} bytes: HTTP replies to {replies_at_once(value):,} refusals at once"
    try:
        setting.write_text(f"{wanted}\n")
    except OSError:
        return f"warning: {advice(value)}"
    return (
        f"raised net.core.wmem_default from {value:,} to {wanted:,} bytes, so that Triton's HTTP frontend keeps "
        f"replies to {replies_at_once(wanted):,} refusals at once"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only say whether the setting is high enough")
    args = parser.parse_args(argv)
    if args.check:
        problem = advice(current())
        print(problem or f"net.core.wmem_default is high enough ({current():,} bytes)")
        return 1 if problem else 0
    print(raise_setting())
    return 0


if __name__ == "__main__":
    sys.exit(main())
