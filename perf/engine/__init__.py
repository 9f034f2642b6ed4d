"""The benchmark engine: targets, load generators, sweeps and reports, for any workload of perf.workloads."""
