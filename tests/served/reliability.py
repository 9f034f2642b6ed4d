"""Helpers for the reliability tests: sizes that `make soak/peak/fuzz` scale up, servers of their own
built from the committed sources (and patched by code), what counts as an overload refusal."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from clients.triton import is_retryable
from kit.control.configs import parse_config, render_config
from kit.control.repository import build
from kit.control.specs import ModelSpec
from kit.server.runtime import ServerOptions, TritonServer
from tests.conftest import ARTIFACTS, REPO_ROOT

if TYPE_CHECKING:
    from tests.served.gate import Gate

RADAR_MODELS = ("radar", "radar_texts", "radar_classifier")
RESULTS = REPO_ROOT / "build" / "reliability"


def is_overload(outcome) -> bool:
    """A refusal by a queue policy (full queue or queue timeout), possibly relayed by an entry model."""
    return (
        isinstance(outcome, InferenceServerException)
        and is_retryable(outcome)
        and any(reason in outcome.message() for reason in ("maximum queue size", "timeout expired"))
    )


def scale(name: str, default: float) -> float:
    """A test size; the long make targets raise it through the environment (e.g. KIT_SOAK_SECONDS)."""
    return float(os.environ.get(f"KIT_{name}", default))


def tiny_queue(size: int, instances: int, max_batch: int | None = None, window: int | None = None):
    """`window`: the chunks an entry that hands its work off keeps in flight (radar_texts' chunks_in_flight)."""

    def change(config):
        policy = config.dynamic_batching.default_queue_policy
        policy.max_queue_size = size
        config.instance_group[0].count = instances
        if max_batch is not None:
            config.max_batch_size = max_batch
        if window is not None:
            config.parameters["chunks_in_flight"].string_value = str(window)

    return change


def patch_config(repository: Path, model: str, change: Callable[[mc.ModelConfig], None]) -> None:
    """Edit a built config through Triton's schema (test variants are derived, never hand-copied)."""
    path = repository / model / "config.pbtxt"
    config = parse_config(path.read_text())
    change(config)
    path.write_text(render_config(config))


@contextlib.contextmanager
def own_server(
    tmp_path: Path,
    patches: dict[str, Callable[[mc.ModelConfig], None]] | None = None,
    models: tuple[str, ...] = RADAR_MODELS,
    artifacts: Path = ARTIFACTS,
    profile: str = "cpu",
    specs: Mapping[str, ModelSpec] | None = None,
    gates: Iterable[Gate] = (),
    **options,
) -> Iterator[TritonServer]:
    """A server of the test's own (free ports, the `profile`'s repository in tmp_path, with users' `specs` where
    given), for tests that overload it, kill its processes, change its options or serve changed `artifacts`, so that
    the shared session server stays clean. `gates` are written beside their targets (tests.served.gate); `patches`
    route callers through them."""
    repository = tmp_path / "repository"
    specs = dict(specs or {})
    build(profile, repository, artifacts, specs=specs, models=(*models, *specs))  # the closure of what they call
    for gate in gates:
        gate.install(repository, tmp_path / "gates" / gate.name)
    for model, change in (patches or {}).items():
        patch_config(repository, model, change)
    with TritonServer(ServerOptions.on_free_ports(repository, **options), log_path=tmp_path / "server.log") as server:
        yield server


def save_result(name: str, result: dict) -> None:
    """Figures for perf/RELIABILITY.md, one JSON per run under build/reliability/."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{name}: {json.dumps(result)}")


def wait_for(condition: Callable[[], bool], timeout: float, every: float = 0.02) -> bool:
    """Whether `condition()` holds within `timeout` seconds, asked every `every` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True


class Workers:
    """Threads that work until the `with` block ends: subclasses fill `self.threads` and read `self.stop`."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)
