"""The perf kit: one engine (perf.engine) that knows no workload, the workloads it measures
(perf.workloads, registered once), the hand-rolled baselines, quick probes and the layout search.
Numbers go to generated reports under perf/results/, never into tests' assertions."""
