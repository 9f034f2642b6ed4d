"""The Triton metric names the deployment files query, read from the files themselves.

A dashboard panel or an autoscaler on a misspelt metric shows nothing and fails silently, so the
tests compare what these files reference with the names Triton documents (below, from its metrics
guide for release 24.10) and, for every name a CPU server exports, with a running server.

    python -m deploy.metric_names     # prints each file's references
"""

from __future__ import annotations

import re
from pathlib import Path

DEPLOY = Path(__file__).resolve().parent
METRIC = re.compile(r"\bnv_[a-z0-9_]+")

# Triton's documented names (docs/user_guide/metrics.md of the server's r24.10 branch).
REQUEST_METRICS = {
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_pending_request_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
}
CPU_METRICS = {"nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes"}
# Collected through DCGM, so exported only by a server that sees a GPU: verified only on GPU.
GPU_METRICS = {
    "nv_gpu_utilization",
    "nv_gpu_memory_total_bytes",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_power_usage",
    "nv_gpu_power_limit",
    "nv_energy_consumption",
}
DOCUMENTED = REQUEST_METRICS | CPU_METRICS | GPU_METRICS


def deployment_files(root: Path = DEPLOY) -> list[Path]:
    """Every config under deploy/ that can query metrics: dashboards, Prometheus, Kubernetes."""
    return sorted(p for p in root.rglob("*") if p.suffix in {".json", ".yml", ".yaml"})


def referenced(files: list[Path] | None = None) -> dict[str, set[str]]:
    """{file relative to deploy/: the nv_* names it mentions}, for files that mention any."""
    found = {}
    for path in deployment_files() if files is None else files:
        names = set(METRIC.findall(path.read_text()))
        if names:
            found[str(path.relative_to(DEPLOY))] = names
    return found


def all_referenced() -> set[str]:
    return set().union(*referenced().values())


if __name__ == "__main__":
    for file, names in referenced().items():
        print(f"{file}: {', '.join(sorted(names))}")
