"""A runner's own metrics, exported by Triton beside its own (its metrics port, `kit_runner_*`): where each run's time
goes (the tensors built, the copy to the device, the forward pass, the copy back), which shapes ran and whether each
was warmed at load and replayed from a CUDA graph, the rows padded, and what the warm-up took. Triton's own counters
stop at an execution's compute time; these split it, so that a GPU run's report can say which part holds it.

The Python backend's custom metrics (pb_utils.MetricFamily) are shared by every instance that names the same family
and labels: a model's instances add up, as Triton's own per-model counters do.
"""

from __future__ import annotations

from kit.adapters.triton import pb
from kit.runners.torch import Run, Warmup

STAGES = ("tensors", "h2d", "forward", "d2h")
# Seconds: from a tenth of a millisecond (a small copy) to two seconds (a cold first run of a large batch).
BUCKETS = [0.0001, 0.0003, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0]


class RunnerMetrics:
    """The metrics of one model's runner; `observe` takes each run, `warmed` the warm-up."""

    def __init__(self, model: str):
        utils = pb()
        family = utils.MetricFamily
        self.model = model
        self.stage_family = family("kit_runner_stage_seconds", "Seconds per run of a runner, by stage", family.HISTOGRAM)
        self.runs_family = family("kit_runner_runs_total", "Runs of a runner, by padded shape, warmed, graph", family.COUNTER)
        self.rows_family = family("kit_runner_rows_total", "Rows a runner ran: asked for, and padding", family.COUNTER)
        self.warm_family = family("kit_runner_warmup", "What a runner's warm-up did, by what", family.GAUGE)
        self.stages = {
            stage: self.stage_family.Metric(labels={"model": model, "stage": stage}, buckets=BUCKETS) for stage in STAGES
        }
        self.rows = {kind: self.rows_family.Metric(labels={"model": model, "rows": kind}) for kind in ("asked", "padding")}
        self.runs: dict[tuple, object] = {}
        self.warm: dict[str, object] = {}

    def observe(self, run: Run) -> None:
        for stage, seconds in zip(STAGES, (run.tensors_s, run.h2d_s, run.forward_s, run.d2h_s)):
            self.stages[stage].observe(seconds)
        key = (run.shape, run.warmed, run.graph)
        if key not in self.runs:
            labels = {"model": self.model, "shape": run.shape, "warmed": str(run.warmed).lower(), "graph": str(run.graph).lower()}
            self.runs[key] = self.runs_family.Metric(labels=labels)
        self.runs[key].increment(1)
        self.rows["asked"].increment(run.rows)
        if run.padded_rows > run.rows:
            self.rows["padding"].increment(run.padded_rows - run.rows)

    def warmed(self, warmup: Warmup) -> None:
        figures = {
            "shapes": warmup.shapes,
            "graphs": warmup.graphs,
            "seconds": warmup.seconds,
            "graph_bytes": warmup.graph_bytes,
            "budget_bytes": warmup.budget_bytes,
        }
        for what, value in figures.items():
            gauge = self.warm_family.Metric(labels={"model": self.model, "what": what})
            gauge.set(float(value))
            self.warm[what] = gauge  # a metric lives as long as its object
