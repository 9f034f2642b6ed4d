"""A sweep fitted into a deadline (`python -m perf sweep --deadline` or `--budget`): before each server start,
limit and point the engine asks whether its estimate still fits, and records what it skips instead of being
cut off half-way, so that a run on a host with a hard time limit (the GPU host's 10-minute calls) returns
everything it measured and says what it left out.

Estimates come from the spec's `budget` section (seconds; the defaults below) and from the loads
themselves: a closed-loop window knows its length. `call_s` adds them up for a suite run in turns as
deploy/gpu_host/run.sh runs it, its set-up included, so that a unit test can hold a GPU call to the time it is given.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

# The last servers' shutdown (TritonServer.stop's SIGINT wait and the stubs' reaping, at worst) and the report.
STOP_S = 35.0
REPORT_S = 5.0
ESTIMATES = {"start_s": 60.0, "limit_s": 60.0, "accuracy_s": 10.0}
# Per point beyond its warm-up and window: the client's set-up, the counters read at both bounds, the printout.
POINT_OVERHEAD_S = 1.0
# run.sh's set-up before the sweep on the GPU host: the server unpacked, the carried wheels installed, the overlay, the
# import and library checks, the stubs' import probe, the models generated. The committed run logs under
# perf/results/gpu/ took 52, 65 and 88 s ("done in" less the sweep's minutes), the 88 s with ResNet-50's model (6 s).
SETUP_S = 85.0


class Budget:
    """Seconds left before a deadline (Unix time; None: no deadline), less a reserve for stopping the last
    servers and writing the results."""

    def __init__(
        self,
        deadline: float | None,
        estimates: dict | None = None,
        reserve_s: float = STOP_S + REPORT_S,
        clock: Callable[[], float] = time.time,
    ):
        self.deadline, self.reserve_s, self.clock = deadline, reserve_s, clock
        self.estimates = {**ESTIMATES, **(estimates or {})}

    def left(self) -> float:
        if self.deadline is None:
            return math.inf
        return self.deadline - self.reserve_s - self.clock()

    def allows(self, seconds: float) -> bool:
        return seconds <= self.left()

    def point_s(self, load) -> float:
        """A point's estimate: its window's own length."""
        return load.seconds + POINT_OVERHEAD_S

    def __getitem__(self, step: str) -> float:
        return self.estimates[step]


def part_s(spec: dict) -> float:
    """One spec run in turns at its estimates: its targets started at once, the accuracy check, each round's limit
    and windows, its servers stopped and its report written."""
    budget = Budget(None, spec.get("budget"))
    settings = sum(len(s) for s in spec["targets"].values())
    loads = sum(len(sweep.get("concurrency", [])) for sweep in (spec["sweep"], *spec.get("extra", {}).values()))
    window = spec["window"]["warmup_s"] + spec["window"]["duration_s"] + POINT_OVERHEAD_S
    rounds = spec["rounds"] * (("limit" in spec) * budget["limit_s"] + settings * loads * window)
    return budget["start_s"] + ("accuracy" in spec) * budget["accuracy_s"] + rounds + STOP_S + REPORT_S


def call_s(suite: dict) -> float:
    """deploy/gpu_host/run.sh with a suite spec at its estimates: the set-up, then each part."""
    return SETUP_S + sum(part_s(part) for part in suite["suite"].values())
