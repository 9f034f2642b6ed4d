"""Run the Triton server that ships inside the `nvidia-pytriton` wheel, with no Docker and no GPU.

Used by `make serve` and by the test fixture alike, so that what the tests start is what users run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


class ServerError(RuntimeError):
    """The embedded server could not be found, prepared or started."""


def triton_dist() -> Path:
    """The `tritonserver` distribution bundled in the installed pytriton wheel."""
    try:
        import pytriton
    except ImportError as exc:
        raise ServerError(
            "nvidia-pytriton is not installed in this Python; run `make serve` (it creates the serving venv)"
        ) from exc
    dist = Path(pytriton.__file__).parent / "tritonserver"
    if not (dist / "bin" / "tritonserver").is_file():
        raise ServerError(f"no tritonserver binary under {dist}")
    return dist


def install_python_stub(dist: Path) -> Path:
    """Put the Python-backend stub for the running Python where the backend looks for it.

    The wheel ships one stub per Python version; the backend only looks in its own folder. The stub
    stays inside the wheel's tree so that its relative library path still finds the bundled libs.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    source = dist / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not source.is_file():
        raise ServerError(f"the pytriton wheel has no Python-backend stub for Python {version}")
    target = dist / "backends" / "python" / "triton_python_backend_stub"
    if not target.is_file() or target.stat().st_size != source.stat().st_size:
        shutil.copy2(source, target)
    return target


def free_port(host: str = "127.0.0.1") -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class ServerOptions:
    """How to start the server. Defaults follow Triton's ports on loopback."""

    repository: Path
    host: str = "127.0.0.1"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    log_verbose: int = 0
    extra_args: list[str] = field(default_factory=list)

    @classmethod
    def on_free_ports(cls, repository: Path, **kwargs) -> "ServerOptions":
        return cls(repository, http_port=free_port(), grpc_port=free_port(), metrics_port=free_port(), **kwargs)

    @property
    def http_url(self) -> str:
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"


def server_command(dist: Path, options: ServerOptions) -> list[str]:
    return [
        str(dist / "bin" / "tritonserver"),
        f"--model-repository={options.repository}",
        f"--backend-directory={dist / 'backends'}",
        f"--cache-directory={dist / 'caches'}",
        f"--http-address={options.host}",
        f"--http-port={options.http_port}",
        f"--grpc-address={options.host}",
        f"--grpc-port={options.grpc_port}",
        f"--metrics-address={options.host}",
        f"--metrics-port={options.metrics_port}",
        # Models are fixed at start: clients cannot load or unload them.
        "--model-control-mode=none",
        "--strict-readiness=true",
        "--exit-on-error=true",
        "--allow-gpu-metrics=false",
        f"--log-verbose={options.log_verbose}",
        *options.extra_args,
    ]


def server_env() -> dict[str, str]:
    """The stub takes its packages from the first `python3` on PATH: make it this venv's."""
    env = os.environ.copy()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


class TritonServer:
    """A `tritonserver` child process; a context manager that waits for readiness and stops cleanly."""

    def __init__(self, options: ServerOptions, log_path: Path | None = None):
        self.options = options
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self._log_file = None

    def start(self, timeout: float = 180.0) -> "TritonServer":
        dist = triton_dist()
        install_python_stub(dist)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            server_command(dist, self.options),
            env=server_env(),
            stdout=self._log_file,
            stderr=subprocess.STDOUT if self._log_file else None,
            start_new_session=True,
        )
        self.wait_ready(timeout)
        return self

    def is_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.options.http_url}/v2/health/ready", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"tritonserver exited with code {self.process.returncode}{self._log_hint()}")
            if self.is_ready():
                return
            time.sleep(0.25)
        self.stop()
        raise ServerError(f"tritonserver was not ready within {timeout:.0f} s{self._log_hint()}")

    def _log_hint(self) -> str:
        return f"; see {self.log_path}" if self.log_path else ""

    def stop(self, timeout: float = 30.0) -> None:
        """SIGINT lets Triton unload models and stop its stubs; SIGKILL only if it hangs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "TritonServer":
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
