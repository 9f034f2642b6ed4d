"""Build the local model repository and run the embedded Triton server in the foreground.

    python -m kit.serve [--profile cpu] [--host 127.0.0.1] [--http-port 8000] ...

Stays up until Ctrl-C (or SIGTERM), then stops the server cleanly. Meanwhile a supervisor restarts
the server when it exits, stays unready, or loses a Python stub (see kit.runtime.Supervisor).

Beyond loopback (`--host 0.0.0.0`), the admin endpoints (model repository, logging, trace, shared
memory, statistics) need the header `triton-admin-key`: its value is $TRITON_ADMIN_KEY, or one
generated at start and printed once. Setting $TRITON_ADMIN_KEY restricts them on loopback too.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
from pathlib import Path

from kit.repository import ARTIFACTS, REPO_ROOT, RepositoryError, build
from kit.runtime import ADMIN_HEADER, ServerError, ServerOptions, Supervisor, TritonServer, is_loopback

ADMIN_KEY_ENV = "TRITON_ADMIN_KEY"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--repository", type=Path, default=REPO_ROOT / "build" / "repository")
    parser.add_argument("--artifacts", type=Path, default=ARTIFACTS)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    return parser.parse_args(argv)


def admin_key(host: str, environ=os.environ) -> tuple[str | None, bool]:
    """The key that guards the admin endpoints, and whether it was generated here (so must be shown)."""
    if environ.get(ADMIN_KEY_ENV):
        return environ[ADMIN_KEY_ENV], False
    if is_loopback(host):
        return None, False
    return secrets.token_urlsafe(24), True


def interrupt(*_):
    """SIGTERM takes the same clean path as Ctrl-C (SIGINT is set too: a shell that starts the kit
    in the background makes the process ignore SIGINT)."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    repository = args.repository / args.profile
    try:
        build(args.profile, repository, args.artifacts)
    except RepositoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    key, generated = admin_key(args.host)
    options = ServerOptions(repository, args.host, args.http_port, args.grpc_port, args.metrics_port, admin_key=key)
    server = TritonServer(options)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, interrupt)
    try:
        server.start()
        print(
            f"\nTriton is ready ({args.profile} profile, repository {repository})\n"
            f"  HTTP     http://{options.http_url}\n"
            f"  gRPC     {options.grpc_url}\n"
            f"  metrics  {options.metrics_url}\n"
            + (f"  admin endpoints need the header {ADMIN_HEADER}: {key}\n" if generated else "")
            + "Press Ctrl-C to stop.",
            flush=True,
        )
        Supervisor(server).run()  # returns only by Ctrl-C, or by ServerError once restarts stop helping
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopping tritonserver ...", flush=True)
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
