"""What a GPU run measures and how its time is budgeted: one device call has 10 minutes, so every step has an
estimate, the plan is printed first, and a step that no longer fits before the deadline is skipped and recorded
instead of being cut off half-way.

Servers of one phase are started together (their start-up overlaps) and measured one after another while the
others idle, so a phase costs one start plus its points.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

# Seconds a run gets without a --deadline. run.sh gives it what is left of GPU_BUDGET_S (540 s) from its own start,
# after unpacking the server and installing the carried wheels (about HOST_SETUP_S), which leaves a device call's
# 600 s limit a minute for what no estimate covers.
DEFAULT_BUDGET_S = 540.0
HOST_SETUP_S = 30.0
# Per point beyond its warm-up and window: the client's set-up, the counters read at both bounds, the printout.
POINT_OVERHEAD_S = 1.0
ACCURACY_S = 10.0
REPORT_S = 5.0
# Stopping a phase's servers at its end: TritonServer.stop's SIGINT wait and its stubs' reaping, at worst.
STOP_S = 35.0
# ResNet's batching variants (perf/specs/resnet.json), in the order they are measured: the two the targets
# compare first, so that a short budget drops the others.
RESNET_VARIANTS = ("none", "cost", "triton", "paddle")


@dataclass(frozen=True)
class Mode:
    """How much a run measures: the GPU run (FULL) or the CPU dry run of the same code on tiny models (QUICK)."""

    name: str
    radar_size: str  # export.standins size
    resnet_size: str  # export.resnet size
    texts: int  # samples.texts of 100-800 characters
    clients: tuple[int, ...]
    radar_instances: tuple[int, ...]  # `radar` entry instances, one kit server each
    batcher: tuple[tuple[int, int], ...]  # (BATCH_SIZE_MAX, BATCH_TIMEOUT ms), probed at probe_clients
    probe_clients: int
    limit_batches: tuple[int, ...]
    resnet_clients: tuple[int, ...]
    warmup_s: float
    window_s: float
    probe_window_s: float
    reference_texts: int  # served against the FP32 reference
    reference_images: int
    cost_sides: tuple[int, ...]  # ResNet's cost model: square images of these sides ...
    cost_batches: tuple[int, ...]  # ... at these batch sizes
    cost_repeats: int
    prepare_s: float  # estimate: models, cost model, limit and references in the prepare child
    start_s: float  # estimate: one group of servers started together

    def point_s(self, window_s: float) -> float:
        return self.warmup_s + window_s + POINT_OVERHEAD_S


FULL = Mode(
    name="full",
    radar_size="large",
    resnet_size="resnet50",
    texts=512,
    clients=(1, 16, 64, 256),
    radar_instances=(8, 16, 32),
    batcher=((32, 5), (64, 10), (128, 10)),
    probe_clients=64,
    limit_batches=(8, 16, 32, 64, 128),
    resnet_clients=(1, 8, 32, 70),
    warmup_s=2.0,
    window_s=3.0,
    probe_window_s=3.0,
    reference_texts=16,
    reference_images=8,
    cost_sides=(64, 128, 176, 224, 288),
    cost_batches=(1, 8, 32),
    cost_repeats=5,
    prepare_s=75.0,
    start_s=45.0,
)

QUICK = Mode(
    name="quick",
    radar_size="tiny",
    resnet_size="tiny",
    texts=64,
    clients=(1, 16, 64, 256),
    radar_instances=(2, 4),
    batcher=((16, 5), (32, 10)),
    probe_clients=16,
    limit_batches=(8, 32),
    resnet_clients=(1, 8, 32),
    warmup_s=1.0,
    window_s=1.5,
    probe_window_s=1.0,
    reference_texts=4,
    reference_images=2,
    cost_sides=(64, 128, 224),
    cost_batches=(1, 4),
    cost_repeats=2,
    prepare_s=60.0,
    start_s=40.0,
)


def phase_estimates(mode: Mode) -> dict[str, float]:
    """Seconds each phase is expected to take, in the order they run."""
    sweep = len(mode.clients) * mode.point_s(mode.window_s)
    probes = len(mode.batcher) * mode.point_s(mode.probe_window_s)
    return {
        "prepare": mode.prepare_s,
        "radar kit": mode.start_s + len(mode.radar_instances) * sweep + ACCURACY_S,
        "radar baselines": mode.start_s + 2 * sweep + probes,
        "resnet": mode.start_s + len(RESNET_VARIANTS) * len(mode.resnet_clients) * mode.point_s(mode.window_s) + ACCURACY_S,
        "report": REPORT_S,
    }


def fit_units(left_s: float, start_s: float, unit_s: float, count: int) -> int:
    """How many of `count` servers, started together (`start_s`) then measured one after another (`unit_s`
    each), fit into `left_s` seconds."""
    if unit_s <= 0:
        return count if left_s >= start_s else 0
    return max(0, min(count, math.floor((left_s - start_s) / unit_s)))


class Budget:
    """Seconds left before the deadline, less a reserve for stopping the last servers and writing the results:
    whether a step still runs."""

    def __init__(self, deadline: float, reserve_s: float = REPORT_S + STOP_S, clock: Callable[[], float] = time.time):
        self.deadline = deadline
        self.reserve_s = reserve_s
        self.clock = clock

    def left(self) -> float:
        return self.deadline - self.reserve_s - self.clock()

    def allows(self, seconds: float) -> bool:
        return seconds <= self.left()


def plan_lines(mode: Mode, budget: Budget) -> list[str]:
    """The plan printed at the start: each phase's estimate, their sum, and the time the deadline leaves."""
    estimates = phase_estimates(mode)
    lines = [f"plan ({mode.name}): {budget.left():.0f} s left before the deadline"]
    lines += [f"  {name:<16} ~{seconds:4.0f} s" for name, seconds in estimates.items()]
    lines.append(f"  {'total':<16} ~{sum(estimates.values()):4.0f} s")
    return lines
