"""Run the Triton server that ships inside the `nvidia-pytriton` wheel, with no Docker and no GPU.

Used by `make serve` and by the test fixture alike, so that what the tests start is what users run.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from kit.server.healthcheck import stub_instance, unreplaced, version_of


class ServerError(RuntimeError):
    """The embedded server could not be found, prepared or started."""


# A `tritonserver` tree laid out as in the pytriton wheel, for a host without pytriton (deploy/gpu_host/carry.py repacks one).
DIST_ENV = "KIT_TRITON_DIST"


def triton_dist() -> Path:
    """The `tritonserver` distribution: the tree KIT_TRITON_DIST names, else the one in the installed pytriton wheel."""
    if os.environ.get(DIST_ENV):
        dist = Path(os.environ[DIST_ENV])
    else:
        try:
            import pytriton
        except ImportError as exc:
            raise ServerError(
                f"nvidia-pytriton is not installed in this Python and {DIST_ENV} is not set; run `make serve` "
                "(it creates the serving venv)"
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


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports: the sockets stay bound until all are chosen, because the kernel
    may hand a just-closed port out again (a server once got the same port for HTTP and metrics)."""
    with contextlib.ExitStack() as stack:
        sockets = [
            stack.enter_context(contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM))) for _ in range(count)
        ]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


# Endpoints that change or reveal server state rather than serve inference: with an admin key set,
# they answer only requests that carry the key in this header (HTTP) or metadata key (gRPC).
ADMIN_APIS = ("model-repository", "logging", "trace", "shared-memory", "statistics")
ADMIN_HEADER = "triton-admin-key"
GRPC_ADMIN_HEADER = f"triton-grpc-protocol-{ADMIN_HEADER}"  # Triton prefixes gRPC restriction headers


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class ServerOptions:
    """How to start the server. Defaults follow Triton's ports on loopback.

    `admin_key`: when set, the ADMIN_APIS need the ADMIN_HEADER with this value (see kit.server.serve).
    `gpu_metrics`: Triton's GPU utilisation and memory metrics (DCGM), for a server with GPU models.
    `environment`: variables for the server's processes alone (its stubs inherit them), e.g. where a simulated
    accelerator counts its busy time (perf.sim.device).
    """

    repository: Path
    host: str = "127.0.0.1"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    log_verbose: int = 0
    admin_key: str | None = None
    gpu_metrics: bool = False
    extra_args: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)

    @classmethod
    def on_free_ports(cls, repository: Path, **kwargs) -> ServerOptions:
        http_port, grpc_port, metrics_port = free_ports(3)
        return cls(repository, http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port, **kwargs)

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
        # Explicit control: every model in the repository loads at start (and again after a restart, at the
        # versions its config.pbtxt names), and a new version can be loaded while the old one serves
        # (kit.server.deploy). Loading is the model-repository API, an admin API: beyond loopback it needs the key.
        "--model-control-mode=explicit",
        "--load-model=*",
        "--strict-readiness=true",
        "--exit-on-error=true",
        f"--allow-gpu-metrics={str(options.gpu_metrics).lower()}",
        f"--log-verbose={options.log_verbose}",
        *restricted_api_args(options.admin_key),
        *options.extra_args,
    ]


def restricted_api_args(admin_key: str | None) -> list[str]:
    if admin_key is None:
        return []
    restriction = f"{','.join(ADMIN_APIS)}:{ADMIN_HEADER}={admin_key}"
    return [f"--http-restricted-api={restriction}", f"--grpc-restricted-protocol={restriction}"]


# Where the Python-backend stub finds its libpython on a host whose Python keeps it off the loader's path (deploy/gpu_host/run.sh
# sets it): given to the server's processes alone, not to the whole environment.
STUB_LIBRARY_ENV = "KIT_STUB_LIBRARY_PATH"


def server_env() -> dict[str, str]:
    """The stub takes its packages from the first `python3` on PATH: make it this venv's."""
    env = os.environ.copy()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if env.get(STUB_LIBRARY_ENV):
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [env[STUB_LIBRARY_ENV], env.get("LD_LIBRARY_PATH")]))
    return env


REPLACED_S = 3.0  # how long a reload may take to start an instance's new stub after its old one has gone
SHM_PREFIX = "triton_python_backend_shm_region"


@dataclass
class Stub:
    """One Python-backend stub process: a model instance (e.g. `radar_classifier_0_1`) runs in it."""

    process: psutil.Process
    instance: str
    shm_region: str | None
    model_py: str = ""  # <repository>/<model>/<version>/model.py: which version the instance serves
    ended_at: float | None = None  # when it was first found ended while its version served, with nothing in its place

    @classmethod
    def from_process(cls, process: psutil.Process) -> Stub | None:
        """The stub of a model instance that `process` is, or None (kit.server.healthcheck.stub_instance)."""
        try:
            args = process.cmdline()
        except psutil.Error:
            return None
        if (named := stub_instance(args)) is None:
            return None
        region = next((a for a in args if a.startswith(SHM_PREFIX)), None)
        return cls(process, named[1], region, named[0])

    def key(self) -> tuple[str, str]:
        return self.model_py, self.instance

    def started(self) -> float:
        return self.process.create_time()

    def alive(self) -> bool:
        try:
            return self.process.is_running() and self.process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def remove_region(self) -> None:
        """Its /dev/shm region, which outlives a stub that was killed (1 MiB or more, until reboot)."""
        if self.shm_region:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"/dev/shm/{self.shm_region}")

    def dead(self) -> bool:
        """Ended for REPLACED_S while its version served, and nothing took its place (TritonServer.dead_stubs)."""
        return self.ended_at is not None and time.monotonic() - self.ended_at >= REPLACED_S


def answers_ok(url: str, timeout: float = 2) -> bool:
    """Whether a GET of `url` answers 200: health and readiness probes of the server, the door and
    the baselines."""
    return status_of(url, timeout) == 200


def status_of(url: str, timeout: float = 2) -> int | None:
    """The status a GET of `url` answers; None where nothing answered (refused, reset, timed out, or cut off
    mid-answer), which a probe must not read as a "no"."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, http.client.HTTPException):
        return None


class TritonServer:
    """A `tritonserver` child process; a context manager that waits for readiness and stops cleanly."""

    def __init__(self, options: ServerOptions, log_path: Path | None = None):
        self.options = options
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.stubs: list[Stub] = []
        self._log_file = None

    def start(self, timeout: float = 180.0) -> TritonServer:
        dist = triton_dist()
        install_python_stub(dist)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            server_command(dist, self.options),
            env=server_env() | self.options.environment,
            stdout=self._log_file,
            stderr=subprocess.STDOUT if self._log_file else None,
            start_new_session=True,
        )
        self.wait_ready(timeout)
        # With --strict-readiness every model instance is up once the server is ready: these stubs are all.
        self.stubs = self.current_stubs()
        return self

    def current_stubs(self) -> list[Stub]:
        """The server's stubs now, as models load and unload versions while it runs (kit.server.deploy), and the
        known ones that have ended (a zombie's command line can no longer be read, so it is kept from before, until
        dead_stubs judges its end) or still run outside the server's tree: a killed server's orphans, which a
        restart must still reap."""
        try:
            children = psutil.Process(self.process.pid).children()
        except psutil.NoSuchProcess:
            return self.stubs
        found = [stub for stub in map(Stub.from_process, children) if stub is not None]
        pids = {stub.process.pid for stub in found}
        return found + [stub for stub in self.stubs if stub.process.pid not in pids]

    def is_ready(self) -> bool:
        return answers_ok(f"http://{self.options.http_url}/v2/health/ready")

    def dead_stubs(self) -> list[str]:
        """Instances whose stub process died. Triton >= 24.06 does not restart them and keeps reporting the server
        and the model ready, while requests sent to that instance fail. A stub that has ended (a zombie, or gone:
        Triton reaps a dead stub when it checks the instance's health) died if its version still serves and no stub
        has taken its place (kit.server.healthcheck.unreplaced) for REPLACED_S: an unload takes the version out of
        readiness as its stubs end, and a reload starts a new stub for the same instance and version, sometimes a moment
        after the old one ended (seen under load while a deploy loaded an ensemble, and when it retired a texts model's
        old version)."""
        previous = self.stubs
        current = self.current_stubs()
        self.stubs = [stub for stub in current if stub.alive()]
        ended = [stub for stub in {stub.process.pid: stub for stub in [*previous, *current]}.values() if not stub.alive()]
        judged = unreplaced(ended, self.stubs, Stub.key, Stub.started)
        now = time.monotonic()
        for stub in ended:
            serving = self.version_ready(stub) if stub in judged else False
            if serving is False:
                stub.remove_region()  # replaced by a reload or ended by an unload: a stub killed meanwhile left it
                continue
            if serving:  # unknown (the probe went unanswered): kept, and judged again at the next call
                stub.ended_at = stub.ended_at or now
            self.stubs.append(stub)
        return [stub.instance for stub in self.stubs if stub.dead()]

    def version_ready(self, stub: Stub) -> bool | None:
        """Whether the stub's version serves; None where Triton did not answer (a loaded or paused server): a dead
        stub forgotten then would never be found again, since a zombie's command line can no longer be read."""
        model = version_of(stub.model_py)
        if model is None:
            return False
        status = status_of(f"http://{self.options.http_url}/v2/models/{model[0]}/versions/{model[1]}/ready")
        return None if status is None else status == 200

    def wait_ready(self, timeout: float) -> None:
        """Records the stubs as they start, so that one that dies before the server is ready is known: its command
        line can no longer be read once it has died, and a dead stub nobody knew of would never be replaced."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"tritonserver exited with code {self.process.returncode}{self._log_hint()}")
            self.stubs = self.current_stubs()
            # Triton starts its metrics service a moment after the HTTP one: ready is when both answer, so that a
            # caller's first scrape is not refused.
            if self.is_ready() and answers_ok(self.options.metrics_url):
                return
            time.sleep(0.25)
        self.stop()
        raise ServerError(f"tritonserver was not ready within {timeout:.0f} s{self._log_hint()}")

    def _log_hint(self) -> str:
        return f"; see {self.log_path}" if self.log_path else ""

    def stop(self, timeout: float = 30.0) -> None:
        """SIGINT lets Triton unload models and stop its stubs; SIGKILL only if it hangs (it waits out
        its whole exit timeout when a stub has died). Every stub it has meanwhile is reaped after it, those of
        versions loaded since it started (kit.server.deploy) and of a load it still takes as it stops (seen: a
        deploy's load, taken after SIGINT, started stubs that the SIGKILL killed) too: Triton's own stop leaves
        their /dev/shm regions behind."""
        if self.process is not None:
            self.stubs = self.current_stubs()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            deadline = time.monotonic() + timeout
            while self.process.poll() is None and time.monotonic() < deadline:
                self.stubs = self.current_stubs()
                time.sleep(0.1)
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._reap_stubs()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _reap_stubs(self, wait: float = 5.0) -> None:
        """Once the server is gone its stubs should exit by themselves, but one busy when the server
        was killed can outlive it (seen: orphans still running minutes later), so survivors are killed.
        A stub removes its /dev/shm region when it exits, unless it was killed: then the region
        (1 MiB or more per instance) would stay until reboot, so it is removed here."""
        deadline = time.monotonic() + wait
        while any(stub.alive() for stub in self.stubs) and time.monotonic() < deadline:
            time.sleep(0.05)
        for stub in self.stubs:
            if stub.alive():
                with contextlib.suppress(psutil.NoSuchProcess):
                    stub.process.kill()
        for stub in self.stubs:
            stub.remove_region()
        self.stubs = []

    def __enter__(self) -> TritonServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


class Supervisor:
    """Keeps the server healthy: restarts it when its process exits, when it has not been ready for
    `grace` seconds, or as soon as a Python stub dies (nothing else would bring that instance back).

    Restarts are bounded: more than `max_restarts` within `window` seconds raises ServerError, so a
    server that cannot stay up fails loudly instead of flapping forever.
    """

    def __init__(
        self,
        server: TritonServer,
        poll: float = 1.0,
        grace: float = 10.0,
        stop_timeout: float = 5.0,
        max_restarts: int = 5,
        window: float = 600.0,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ):
        self.server = server
        self.poll = poll
        self.grace = grace
        self.stop_timeout = stop_timeout
        self.max_restarts = max_restarts
        self.window = window
        self.log = log
        self.restarts: list[float] = []
        self._unready_since: float | None = None

    def problem(self) -> str | None:
        """Why the server needs a restart now, or None while it is healthy (or still within grace)."""
        code = self.server.process.poll()
        if code is not None:
            return f"tritonserver exited with code {code}"
        dead = self.server.dead_stubs()
        if dead:
            return f"Python stub of {', '.join(dead)} died"
        if self.server.is_ready():
            self._unready_since = None
            return None
        now = time.monotonic()
        self._unready_since = self._unready_since or now
        return f"not ready for {self.grace:.0f} s" if now - self._unready_since >= self.grace else None

    def restart(self, reason: str) -> None:
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < self.window] + [now]
        if len(self.restarts) > self.max_restarts:
            raise ServerError(f"{reason}; giving up after {self.max_restarts} restarts within {self.window:.0f} s")
        self.log(f"supervisor: {reason}; restarting tritonserver")
        self._unready_since = None
        self.server.stop(self.stop_timeout)
        try:
            self.server.start()
        except ServerError as exc:  # seen again at the next poll, and counted
            self.log(f"supervisor: restart failed: {exc}")
            return
        self.log("supervisor: tritonserver is ready again")

    def run(self, stop: threading.Event | None = None) -> None:
        """Check every `poll` seconds until `stop` is set (forever when None)."""
        stop = stop or threading.Event()
        while not stop.wait(self.poll):
            reason = self.problem()
            if reason is not None:
                self.restart(reason)
