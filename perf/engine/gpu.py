"""The GPU's utilisation and memory during a measured point, from NVML (nvidia-ml-py's `pynvml`), for a spec
with `"gpu": true`.

A thread samples every `interval_s` from the end of the point's warm-up to its end: utilisation of the device
(the share of time a kernel ran) and the GPU memory of the measured target's own processes, so that idle
servers of the same run do not count. Without a driver (a CPU rehearsal) every summary says why it is empty.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import pynvml


@functools.cache
def device(index: int = 0):
    """The NVML handle of GPU `index`, or the reason there is none (a string)."""
    try:
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except pynvml.NVMLError as exc:
        return f"NVML unavailable: {exc}"


def describe(index: int = 0) -> dict:
    """The GPU's name, driver and memory, for the report's environment."""
    handle = device(index)
    if isinstance(handle, str):
        return {"unavailable": handle}
    return {
        "name": pynvml.nvmlDeviceGetName(handle),
        "driver": pynvml.nvmlSystemGetDriverVersion(),
        "memory_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20,
    }


def process_memory_mib(handle, pids: set[int]) -> float | None:
    """GPU memory held by `pids`; None where the driver does not attribute memory to them: no figure per process,
    or none of them listed (in a VM or container the driver sees other process ids than ours)."""
    used = [p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid in pids]
    if not used or any(u is None for u in used):
        return None
    return sum(used) / 2**20


class GpuSampler:
    """A context manager sampling the GPU while a window is measured; `summary()` once it is left."""

    def __init__(self, pids: Callable[[], set[int]], delay_s: float, interval_s: float = 0.2, index: int = 0):
        self.pids, self.delay_s, self.interval_s = pids, delay_s, interval_s
        self.handle = device(index)
        self.util: list[float] = []
        self.memory: list[float] = []
        self.memory_of = "the target's processes"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        if self._stop.wait(self.delay_s):
            return
        while not self._stop.is_set():
            self.util.append(pynvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            memory = process_memory_mib(self.handle, self.pids())
            if memory is None:
                self.memory_of, memory = "the whole device", pynvml.nvmlDeviceGetMemoryInfo(self.handle).used / 2**20
            self.memory.append(memory)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> GpuSampler:
        if not isinstance(self.handle, str):
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def summary(self) -> dict:
        if isinstance(self.handle, str):
            return {"unavailable": self.handle}
        if not self.util:
            return {"unavailable": "no sample inside the window"}
        return {
            "util_mean_pct": sum(self.util) / len(self.util),
            "util_max_pct": max(self.util),
            "memory_max_mib": max(self.memory),
            "memory_of": self.memory_of,
            "samples": len(self.util),
        }
