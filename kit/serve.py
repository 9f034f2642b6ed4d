"""Build the local model repository and run the embedded Triton server in the foreground.

    python -m kit.serve [--profile cpu] [--host 127.0.0.1] [--http-port 8000] ...

Stays up until Ctrl-C (or SIGTERM), then stops the server cleanly.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from kit.repository import ARTIFACTS, REPO_ROOT, RepositoryError, build
from kit.runtime import ServerError, ServerOptions, TritonServer


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
    options = ServerOptions(repository, args.host, args.http_port, args.grpc_port, args.metrics_port)
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
            "Press Ctrl-C to stop.",
            flush=True,
        )
        server.process.wait()
        print(f"tritonserver exited with code {server.process.returncode}", file=sys.stderr)
        return 1
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
