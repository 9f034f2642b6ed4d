"""The perf kit: one engine (perf.engine) that knows no workload, the workloads it measures
(perf.workloads, registered once), the hand-rolled baselines and the chaos run.
Numbers go to generated reports under perf/results/, never into tests' assertions."""
