"""The metric names the deployment files query exist on a real Triton server.

The running CPU server exports every request and CPU metric; the GPU ones (DCGM) appear only on a
server that sees a GPU, so they are the one exemption, listed in deploy/metric_names.py as
verified only on GPU and checked there against Triton's documented names.
"""

import re
import urllib.request

import pytest

from deploy.metric_names import CPU_METRICS, GPU_METRICS, REQUEST_METRICS, all_referenced


@pytest.fixture(scope="module")
def exported(server) -> set[str]:
    with urllib.request.urlopen(server.options.metrics_url, timeout=10) as response:
        return set(re.findall(r"^# TYPE (\w+) ", response.read().decode(), re.M))


def test_every_non_gpu_metric_the_deployment_queries_is_exported(exported):
    assert all_referenced() - GPU_METRICS <= exported


def test_the_documented_request_and_cpu_metric_names_match_the_server(exported):
    assert REQUEST_METRICS | CPU_METRICS <= exported
    assert not GPU_METRICS & exported  # this server has no GPU: these stay verified only on GPU
