"""The most requests Triton held at once per model (its pending-request gauge), sampled every 50 ms in a process
of its own: a burst's asyncio client holds the test process's GIL while it fires, and a sampling thread there
could be starved of its scrapes for the whole burst, missing the peak it is meant to see.

`python -m tests.served.pending METRICS_URL` prints `ready` after its first scrape and, on SIGTERM, the peaks and
the number of scrapes as one JSON line."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.conftest import REPO_ROOT

GAUGE = re.compile(r'nv_inference_pending_request_count\{model="(\w+)",version="\d+"\} (\S+)')


@dataclass
class Pending:
    """What the sampler saw: each model's peak, and how many scrapes it made (filled in when sampling ends)."""

    peak: Counter = field(default_factory=Counter)
    scrapes: int = 0


@contextlib.contextmanager
def sampling_pending(metrics_url: str) -> Iterator[Pending]:
    seen = Pending()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.served.pending", metrics_url], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the pending-request sampler could not scrape {metrics_url}")
        yield seen
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    result = json.loads(out)
    seen.peak.update(result["peak"])
    seen.scrapes = result["scrapes"]


def sample(metrics_url: str) -> None:
    stop, peak, scrapes = [], Counter(), 0
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    while not stop:
        body = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
        for model, value in GAUGE.findall(body):
            peak[model] = max(peak[model], int(float(value)))
        if not scrapes:
            print("ready", flush=True)
        scrapes += 1
        time.sleep(0.05)
    print(json.dumps({"peak": peak, "scrapes": scrapes}), flush=True)


if __name__ == "__main__":
    sample(sys.argv[1])
