"""One measured point, a closed-loop `Window` (perf.engine.load): the target and load it ran, what was measured, the
workload's own figures, a simulated device's busy seconds where one served it, and where asked the GPU's utilisation
and the target's GPU memory over its window (perf.engine.gpu)."""

from __future__ import annotations

from perf.engine.gpu import GpuSampler
from perf.engine.inputs import InputSet
from perf.engine.load import Window
from perf.engine.procstats import tree


def measure(target, inputs: InputSet, load: Window, sample_gpu: bool = False) -> dict:
    w = target.workload
    if sample_gpu:
        with GpuSampler(lambda: {p.pid for p in tree(target.pids)}, delay_s=load.warmup_s) as sampler:
            m = load.measure(target, inputs)
        m["gpu"] = sampler.summary()
    else:
        m = load.measure(target, inputs)
    counters = {k: m.pop(k) for k in ("triton", "metrics") if k in m}
    device = m.pop("device", {})
    row = {
        "family": target.family,
        "setting": target.label,
        "workers": target.workers,
        "input": inputs.name,
        "load": load.label,
        **m,
        f"{w.item}s_per_request": inputs.per_request,
        w.key: m["throughput"] * inputs.per_request,
        **{k: v for k, v in counters.items() if v},
        **({"device_busy_s": round(device["busy_s"], 3)} if device.get("busy_s") else {}),
    }
    row.update(w.figures(row))
    status = row["error"] or f"{row['throughput']:.2f} req/s p99 {row['p99_ms']:.0f} ms"
    print(f"  {target.family:<9} {target.label:<44} {inputs.name:<6} {load.label:<9} {status}", flush=True)
    return row
