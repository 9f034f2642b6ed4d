"""The served-numerics canary at the door: the export's golden set through the text model that carries it, at start
and every `--canary-interval` seconds, reported by readiness and metrics.

Readiness needs the last verdict to be a pass: none before the first run passed, and none while the
last completed run drifted beyond the tolerance. The canary reports, it does not block traffic: the
routes keep answering. A run that cannot complete (Triton down, a queue refusing it) is no verdict:
it is counted as an error and the last verdict stands (readiness already says when Triton is down);
it is tried again at the next interval, or within seconds while there is no verdict yet, so that a
refusal at start does not keep the door unready for a whole interval.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge

from door.upstream import Upstream
from kit.control.canary import GoldenSet, Report, compare

FIRST_RETRY = 5.0  # seconds between tries while no run has completed
RESULTS = ("ok", "drift", "error")
log = logging.getLogger("door.canary")


async def check(upstream: Upstream, model: str, golden: GoldenSet) -> Report:
    """One run: the model's SCORE for each text through the door's own connection, one request at a time
    (the canary is not a load). What stops it (Triton down, a refusal) propagates: no verdict."""
    scores = []
    for text in golden.texts:
        outputs = await upstream.infer(model, {"TEXT": np.array([text.encode("utf-8")], dtype=np.object_)})
        scores.append(float(outputs["SCORE"][0]))
    return compare(golden, scores)


def json_number(value: float) -> float | str:
    """JSON has no infinity; an unbounded drift (a NaN score) reads as "inf"."""
    return value if math.isfinite(value) else str(value)


class Canary:
    """`check` runs the golden set once through the served model (`check` above, in the app)."""

    def __init__(
        self,
        golden: GoldenSet,
        check: Callable[[], Awaitable[Report]],
        interval: float,
        registry: CollectorRegistry,
        changed: Callable[[], bool] = lambda: False,
    ):
        """`changed`: whether the served model is no longer the version the last run checked, which
        calls for a run at once (a new version loaded under load, kit.server.deploy)."""
        self.golden, self.check, self.interval, self.changed = golden, check, interval, changed
        self.report: Report | None = None  # the last run that completed
        self.checked_at: float | None = None
        self.error: str | None = None  # why the last run could not complete, if it could not
        self.version: str | None = None  # the served version the last verdict is about
        self.runs = Counter(
            "door_canary_runs", "Canary runs, by result: ok, drift or error (no verdict)", ["result"], registry=registry
        )
        for result in RESULTS:
            self.runs.labels(result)
        # Each worker of a door runs its own canary; the door is ok while every live worker's last verdict is.
        self.ok_gauge = Gauge(
            "door_canary_ok",
            "1 while the last canary verdict is a pass, else 0",
            registry=registry,
            multiprocess_mode="livemin",
        )
        self.drift_gauge = Gauge(
            "door_canary_max_drift",
            "Largest |served - source| AI probability of the last canary verdict (NaN before the first)",
            registry=registry,
            multiprocess_mode="livemax",
        )
        self.drift_gauge.set(math.nan)

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    async def run(self) -> None:
        try:
            report = await self.check()
        except Exception as exc:  # whatever stops a run is no verdict on the numbers; the loop must go on
            self.error = f"{type(exc).__name__}: {exc}"
            self.runs.labels("error").inc()
            log.warning("canary run could not complete: %s", self.error)
            return
        self.report, self.checked_at, self.error = report, time.time(), None
        self.runs.labels("ok" if report.ok else "drift").inc()
        self.ok_gauge.set(float(report.ok))
        self.drift_gauge.set(report.max_drift)
        if report.ok:
            log.info("canary ok: max drift %.3g <= tolerance %.3g", report.max_drift, report.tolerance)
        else:
            log.error(
                "canary drift: %.3g > tolerance %.3g on %r; not ready", report.max_drift, report.tolerance, report.worst_text
            )

    async def watch(self) -> None:
        """Run at every interval after the first run (which the app awaits before it serves), within
        seconds while there is no verdict, and as soon as the served version changed."""
        last = time.monotonic()
        while True:
            await asyncio.sleep(min(self.interval, FIRST_RETRY))
            if self.report is None or self.changed() or time.monotonic() - last >= self.interval:
                last = time.monotonic()
                await self.run()

    def status(self) -> dict:
        report = self.report
        return {
            "ok": self.ok,
            "max_drift": json_number(report.max_drift) if report else None,
            "tolerance": self.golden.tolerance,
            "version": self.version,
            "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.checked_at)) if self.checked_at else None,
            "worst_text": report.worst_text if report else None,
            "error": self.error,
        }
