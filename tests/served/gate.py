"""A model held busy by construction, for the overload tests: a gate (tests/served/gate_model.py) in front of a served
model, with the target's batching and queue policy and a queue of a size the test chooses. While the gate is closed
it holds what reaches its one instance and answers nothing, so its queue fills and stays full whatever the scheduler
does, and the next request is refused: the tests count what is held and what is refused instead of racing a flood
against the server. Opened, it forwards each request to its target, so every held request gets the target's answer.

    gate = Gate("radar_texts", queue=4)
    own_server(root, {"radar": gate.as_step}, gates=[gate])     # radar's ensemble step goes through the gate
    with gate.closed():
        held = gate.fill(server, pool, send)    # one request held in execute, then 4 waiting in the queue
        ...                                     # every other request is refused now
    # opened: the held requests are answered
"""

from __future__ import annotations

import contextlib
import functools
import re
import shutil
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from kit.control.configs import parse_config, render_config, set_parameter
from tests.served.reliability import wait_for

MODEL_PY = Path(__file__).with_name("gate_model.py")
WAIT_S = 120.0  # for what must happen (a request reaching the gate or its queue), however loaded the machine


@dataclass
class Gate:
    """`queue`: the gate's max_queue_size; None keeps the target's policy (or its lack of one) as it is."""

    target: str
    queue: int | None
    folder: Path | None = None
    opened_with: int = 0  # arrivals before the gate last closed

    @property
    def name(self) -> str:
        return f"{self.target}_gate"

    def install(self, repository: Path, folder: Path) -> None:
        """Write the gate into a built repository, open, beside its target."""
        target = parse_config((repository / self.target / "config.pbtxt").read_text())
        config = mc.ModelConfig(name=self.name, backend="python", max_batch_size=target.max_batch_size)
        config.input.extend(target.input)
        config.output.extend(target.output)
        config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
        config.dynamic_batching.CopyFrom(target.dynamic_batching)
        if self.queue is not None:
            config.dynamic_batching.default_queue_policy.max_queue_size = self.queue
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        set_parameter(config, "gate_folder", folder)
        set_parameter(config, "gate_target", self.target)
        (repository / self.name / "1").mkdir(parents=True)
        (repository / self.name / "config.pbtxt").write_text(render_config(config))
        shutil.copy(MODEL_PY, repository / self.name / "1" / "model.py")

    def as_step(self, config: mc.ModelConfig) -> None:
        """A patch of an ensemble (kit's entries) whose step is the target: the step goes through the gate."""
        for step in config.ensemble_scheduling.step:
            if step.model_name == self.target:
                step.model_name = self.name

    def as_parameter(self, key: str) -> Callable[[mc.ModelConfig], None]:
        """A patch of a model that calls the target by the name in its parameter `key` (a texts model's `classifier`)."""
        return lambda config: set_parameter(config, key, self.name)

    @contextlib.contextmanager
    def closed(self) -> Iterator[Gate]:
        self.opened_with = self.arrived()
        (self.folder / "closed").touch()
        try:
            yield self
        finally:
            (self.folder / "closed").unlink()

    def arrived(self) -> int:
        """Requests that have reached the gate's execute since it started."""
        path = self.folder / "arrived"
        return path.stat().st_size if path.exists() else 0

    def pending(self, server) -> int:
        """Requests waiting in the gate's queue."""
        return pending(server, self.name)

    def holds(self, server) -> int:
        """Requests the closed gate holds: the one in execute and those in its queue (arrivals count from `closed`)."""
        return self.arrived() - self.opened_with + self.pending(server)

    def fill(self, server, pool: ThreadPoolExecutor, send: Callable[[], object]) -> list[Future]:
        """With the gate closed: one `send()` held in execute, then one more at a time until its queue is full, each
        waited for where Triton counts it, so that what is held is known exactly. The futures of the held requests."""
        assert (self.folder / "closed").exists() and self.queue, "fill a closed gate with a queue of a known size"
        first = self.arrived() + 1
        held = [pool.submit(send)]
        assert wait_for(lambda: self.arrived() == first or held[0].done(), WAIT_S, every=0.05), "nothing reached the gate"
        for waiting in range(1, self.queue + 1):
            held.append(pool.submit(send))
            queued = functools.partial(lambda count, last: self.pending(server) == count or last.done(), waiting, held[-1])
            assert wait_for(queued, WAIT_S, every=0.05), f"the queue did not grow to {waiting}"
        ended = [future.exception() or future.result() for future in held if future.done()]
        assert not ended, f"a request that should be held was answered or refused: {ended[0]!r}"
        return held


def pending(server, model: str) -> int:
    """Requests waiting in `model`'s queue (version 1): Triton's own gauge."""
    body = urllib.request.urlopen(server.options.metrics_url, timeout=10).read().decode()
    found = re.search(rf'nv_inference_pending_request_count\{{model="{model}",version="1"\}} (\S+)', body)
    return int(float(found.group(1))) if found else 0
