"""One measured point, whichever load generator drives it (perf_analyzer's `Load`, the closed loop's
`Window`): the target and load it ran, what was measured, and the workload's own figures."""

from __future__ import annotations

from pathlib import Path

from perf.engine.inputs import InputSet


def measure(target, inputs: InputSet, load, out_dir: Path, name: str) -> dict:
    w = target.workload
    m = load.measure(target, inputs, out_dir, name)
    counters = {k: m.pop(k) for k in ("triton", "metrics") if k in m}
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
    }
    row.update(w.figures(row))
    status = row["error"] or f"{row['throughput']:.2f} req/s p99 {row['p99_ms']:.0f} ms"
    print(f"  {target.family:<9} {target.label:<44} {inputs.name:<6} {load.label:<9} {status}", flush=True)
    return row
