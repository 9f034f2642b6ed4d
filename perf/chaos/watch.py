"""What a chaos run watches while it runs: whether the kit is ready (Triton's readiness and the door's, every
PROBE_S), and every SAMPLE_S the resident memory of the server's tree and the door by role (tritonserver, each model's
stubs, the door) and the `/dev/shm` regions of the server's Python stubs: the live stubs' bytes, and those of the
regions whose stub is gone (left behind until the supervisor's restart removes them)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import psutil
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from kit.server.deploy import GONE
from kit.server.runtime import answers_ok
from perf.chaos.served import ServedKit
from perf.engine.procstats import rss_bytes_by_role

PROBE_S = 0.25
SAMPLE_S = 1.0
MB = 1 << 20
SHM = Path("/dev/shm")


def shm_bytes(regions: set[str]) -> int:
    """The memory `regions` take in /dev/shm (their allocated blocks: a region is sparse until written)."""
    total = 0
    for region in regions:
        try:
            total += os.stat(SHM / region).st_blocks * 512
        except FileNotFoundError:
            continue
    return total


def answer_of(url: str):
    """The JSON a GET of `url` answers, whatever its status; an error's text where none."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read()
    except urllib.error.HTTPError as exc:
        text = exc.read()
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        return json.loads(text)
    except ValueError:
        return text.decode(errors="replace")


def not_ready_versions(http_url: str) -> list[dict] | str:
    """The entries of Triton's repository index not READY (each with its state and reason); an error's text where
    the server does not answer."""
    try:
        index = httpclient.InferenceServerClient(http_url).get_model_repository_index()
    except (InferenceServerException, *GONE) as exc:
        return f"{type(exc).__name__}: {exc}"
    return [entry for entry in index if entry.get("state") != "READY"]


def zombies(pid: int) -> list[int]:
    """The children of `pid` that have ended and wait to be reaped: of a tritonserver, its dead stubs."""
    found = []
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(pid).children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if child.status() == psutil.STATUS_ZOMBIE:
                    found.append(child.pid)
    return found


class Watch:
    """Runs its two samplers from `start()` to `stop()`; times are time.monotonic()."""

    def __init__(self, kit: ServedKit):
        self.kit = kit
        self.readiness: list[tuple[float, bool, bool]] = []  # (t, Triton ready, door ready)
        self.memory: list[tuple[float, dict[str, float]]] = []  # (t, MB by role)
        self.shm: list[tuple[float, float, float, int]] = []  # (t, live stubs' MB, left-behind MB, left-behind regions)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self.probe, daemon=True), threading.Thread(target=self.sample, daemon=True)]

    def start(self) -> Watch:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def ready(self) -> tuple[bool, bool]:
        triton = answers_ok(f"http://{self.kit.server.options.http_url}/v2/health/ready", timeout=1)
        return triton, answers_ok(f"{self.kit.door.url}/health/ready", timeout=1)

    def why_not_ready(self) -> dict:
        """What a kit not ready says for itself: the door's readiness answer (Triton's, each routed model's, the dead
        stubs it sees, the canary), the model versions Triton does not call READY with its reason, and the server's
        zombie stubs, each with the instance it served where the supervisor saw it alive."""
        known = {stub.process.pid: f"{stub.model_py} {stub.instance}" for stub in self.kit.stubs.values()}
        return {
            "door": answer_of(f"{self.kit.door.url}/health/ready"),
            "triton_not_ready": not_ready_versions(self.kit.server.options.http_url),
            "zombie_stubs": {pid: known.get(pid, "never seen alive") for pid in zombies(self.kit.server.process.pid)},
        }

    def probe(self) -> None:
        while not self._stop.wait(PROBE_S):
            self.readiness.append((time.monotonic(), *self.ready()))

    def sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            pids = [self.kit.server.process.pid, self.kit.door.process.pid]
            roles = {role: round(rss / MB, 1) for role, rss in rss_bytes_by_role(pids).items()}
            live = {stub.shm_region for stub in self.kit.seen() if stub.shm_region}
            gone = {region for region in self.kit.regions() - live if (SHM / region).exists()}
            now = time.monotonic()
            self.memory.append((now, roles))
            self.shm.append((now, round(shm_bytes(live) / MB, 1), round(shm_bytes(gone) / MB, 1), len(gone)))

    def ready_again(self, since: float, until: float) -> float | None:
        """Seconds from `since` until Triton and the door were both ready again, where either was not ready between
        `since` and `until` (a fault's effects: it and the next few seconds); 0 where both stayed ready; None where
        they were not ready again by the end of the samples."""
        samples = [(t, triton and door) for t, triton, door in self.readiness if t >= since]
        down = next((t for t, ok in samples if not ok and t <= until), None)
        if down is None:
            return 0.0
        back = next((t for t, ok in samples if ok and t > down), None)
        return None if back is None else round(back - since, 2)

    def memory_figures(self, settle: float) -> dict:
        """Each role's and the total's resident MB: median over the run's first and last fifth of samples after
        `settle` (monotonic time: warm-up and the first requests' allocations), the most seen, and the most seen in
        each half (a process that keeps each burst's mark has a second half no higher than its first's)."""
        steady = [(t, roles) for t, roles in self.memory if t >= settle]
        if len(steady) < 10:
            return {}
        fifth = max(1, len(steady) // 5)
        first, last = steady[:fifth], steady[-fifth:]
        # Roles of a moment (a crashing server's stack-trace helpers, a stub before its command line) hold nothing.
        names = sorted({role for _, roles in steady for role, mb in roles.items() if mb >= 1.0})

        def median(window, name=None):
            return round(
                float(np.median([sum(roles.values()) if name is None else roles.get(name, 0.0) for _, roles in window])), 1
            )

        roles = {name: {"first_mb": median(first, name), "last_mb": median(last, name)} for name in names}
        half = len(steady) // 2
        for name in names:
            roles[name]["max_mb"] = max(r.get(name, 0.0) for _, r in steady)
            roles[name]["halves_max_mb"] = [max(r.get(name, 0.0) for _, r in part) for part in (steady[:half], steady[half:])]
        total = {"first_mb": median(first), "last_mb": median(last), "max_mb": round(max(sum(r.values()) for _, r in steady), 1)}
        shm = [s for s in self.shm if s[0] >= settle]
        return {
            "total": total,
            "by_role": roles,
            "shm_live_mb": {"first": shm[0][1], "last": shm[-1][1], "max": max(s[1] for s in shm)},
            "shm_left_behind": {"max_mb": max(s[2] for s in shm), "max_regions": max(s[3] for s in shm), "at_end": shm[-1][3]},
        }
