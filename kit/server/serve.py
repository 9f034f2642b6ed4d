"""Build the local model repository and run the embedded Triton server in the foreground, with the
front door (door/, docs/DOOR.md) beside it.

    python -m kit.server.serve [--profile cpu] [--host 127.0.0.1] [--http-port 8000] ...
                                [--door-host 127.0.0.1] [--door-port 8080] [--no-door]

Stays up until Ctrl-C (or SIGTERM), then stops the door and the server cleanly. Meanwhile a supervisor
restarts the server when it exits, stays unready, or loses a Python stub (see
kit.server.runtime.Supervisor); the door answers 503 with Retry-After while it does. The door runs
as its own process (`python -m door`: the kit imports nothing from it); if it exits, serve stops.

The door is the front end to expose: Triton's ports stay on --host (loopback by default). Beyond
loopback (`--door-host 0.0.0.0`) inference through the door needs the header `X-API-Key`: a key of
$DOOR_API_KEYS / $DOOR_API_KEYS_FILE, or one generated at start and printed once.

Beyond loopback (`--host 0.0.0.0`), the admin endpoints (model repository, logging, trace, shared
memory, statistics) need the header `triton-admin-key`: its value is $TRITON_ADMIN_KEY, or one
generated at start and printed once. Setting $TRITON_ADMIN_KEY restricts them on loopback too.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import ARTIFACTS, REPO_ROOT, RepositoryError
from kit.control.repository import build, servable_specs
from kit.control.specs import MODELS
from kit.server import reply_buffer
from kit.server.runtime import (
    ADMIN_HEADER,
    ServerError,
    ServerOptions,
    Supervisor,
    TritonServer,
    answers_ok,
    is_loopback,
)

ADMIN_KEY_ENV = "TRITON_ADMIN_KEY"
DOOR_KEY_ENVS = ("DOOR_API_KEYS", "DOOR_API_KEYS_FILE")  # read by the door itself (door.settings)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--repository", type=Path, default=REPO_ROOT / "build" / "repository")
    parser.add_argument("--artifacts", type=Path, default=ARTIFACTS)
    parser.add_argument("--models", type=Path, default=MODELS, help="the folder of model specs (docs/MODELS.md)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    parser.add_argument("--door-host", default="127.0.0.1", help="address the front door listens on (default: loopback only)")
    parser.add_argument("--door-port", type=int, default=8080)
    parser.add_argument("--no-door", action="store_true", help="serve Triton alone")
    return parser.parse_args(argv)


def admin_key(host: str, environ=os.environ) -> tuple[str | None, bool]:
    """The key that guards the admin endpoints, and whether it was generated here (so must be shown)."""
    if environ.get(ADMIN_KEY_ENV):
        return environ[ADMIN_KEY_ENV], False
    if is_loopback(host):
        return None, False
    return secrets.token_urlsafe(24), True


def door_key(host: str, environ=os.environ) -> str | None:
    """A key generated for a door beyond loopback that was given none (shown once, like the admin key)."""
    if any(environ.get(name) for name in DOOR_KEY_ENVS) or is_loopback(host):
        return None
    return secrets.token_urlsafe(24)


class Door:
    """The front door as a child process (`python -m door`) in front of the server's gRPC port."""

    def __init__(
        self,
        triton: str,
        host: str,
        port: int,
        key: str | None,
        log_path: Path | None = None,
        workers: int | None = None,
        settings: dict[str, str] | None = None,
    ):
        """`workers`: the door's processes (--workers); None leaves it to $DOOR_WORKERS, else 1. `settings`: more
        of the door's variables (DOOR_*), over the environment's."""
        self.triton, self.host, self.port, self.key, self.log_path = triton, host, port, key, log_path
        self.workers, self.settings = workers, settings or {}
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else "[::1]" if self.host == "::" else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 120.0) -> None:
        env = {**os.environ, **self.settings, **({DOOR_KEY_ENVS[0]: self.key} if self.key else {})}
        command = [
            sys.executable,
            "-m",
            "door",
            "--triton",
            self.triton,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--wait",
            "60",
            *(["--workers", str(self.workers)] if self.workers else []),
        ]
        log = open(self.log_path, "ab") if self.log_path else None  # else the terminal's, as `make serve` shows it
        try:
            self.process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT if log else None, start_new_session=True
            )
        finally:
            if log:
                log.close()
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.process.poll() is not None:
                raise ServerError(f"the door exited with code {self.process.returncode}")
            if time.monotonic() > deadline:
                raise ServerError(f"the door did not answer on {self.url} within {timeout:.0f} s")
            time.sleep(0.2)

    def answers(self) -> bool:
        return answers_ok(f"{self.url}/health/live")

    def watch(self, stop: threading.Event) -> None:
        """Wait for the door to exit, then stop the supervisor: serve does not run without its door."""
        self.process.wait()
        stop.set()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM lets uvicorn finish the requests in flight (10 s grace); SIGKILL only if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def interrupt(*_):
    """SIGTERM takes the same clean path as Ctrl-C (SIGINT is set too: a shell that starts the kit
    in the background makes the process ignore SIGINT)."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    repository = args.repository / args.profile
    specs, refused = servable_specs(args.models, args.profile)
    for problem in refused:
        print(f"error: {problem} (not served; the other models are)", file=sys.stderr)
    try:
        models = build(args.profile, repository, args.artifacts, specs=specs)
    except RepositoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    key, generated = admin_key(args.host)
    # Triton's GPU metrics where a model runs on a GPU (gpu-embedded); off otherwise, where DCGM only warns.
    on_gpu = any(g.kind == mc.ModelInstanceGroup.KIND_GPU for m in models.values() for g in m.config.instance_group)
    options = ServerOptions(
        repository, args.host, args.http_port, args.grpc_port, args.metrics_port, admin_key=key, gpu_metrics=on_gpu
    )
    print(reply_buffer.raise_setting(), flush=True)  # before Triton creates the sockets it sizes
    server = TritonServer(options)
    # The door reads Triton's model index and registers its shared memory (door.shared_memory): admin calls, with the key
    # where one is set.
    door_settings = {"DOOR_TRITON_ADMIN_KEY": key} if key else None
    door = (
        None
        if args.no_door
        else Door(options.grpc_url, args.door_host, args.door_port, door_key(args.door_host), settings=door_settings)
    )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, interrupt)
    try:
        server.start()
        if door is not None:
            door.start()
            threading.Thread(target=door.watch, args=(stop,), daemon=True).start()
        print(
            f"\nTriton is ready ({args.profile} profile, repository {repository})\n"
            f"  HTTP     http://{options.http_url}\n"
            f"  gRPC     {options.grpc_url}\n"
            f"  metrics  {options.metrics_url}\n"
            + (f"  admin endpoints need the header {ADMIN_HEADER}: {key}\n" if generated else "")
            + (f"  door     {door.url}  (page /, API docs /docs, metrics /metrics)\n" if door else "")
            + (f"  the door's inference routes need the header X-API-Key: {door.key}\n" if door and door.key else "")
            + "Press Ctrl-C to stop.",
            flush=True,
        )
        Supervisor(server).run(stop)  # returns by Ctrl-C, when the door exits, or by ServerError once restarts stop helping
        print(f"error: the door exited with code {door.process.returncode}", file=sys.stderr)
        return 1
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopping tritonserver and the door ...", flush=True)
        return 0
    finally:
        if door is not None:
            door.stop()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
