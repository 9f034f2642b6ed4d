"""`make serve`'s command: builds the repository, serves until interrupted, then stops cleanly."""

import signal
import subprocess
import sys
import time

from clients.radar import RadarClient
from kit.server.runtime import free_ports
from tests.conftest import REPO_ROOT


def test_serve_answers_both_protocols_and_stops_cleanly_on_ctrl_c(tmp_path, radar_artifacts):
    http_port, grpc_port, metrics_port, door_port = free_ports(4)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kit.server.serve",
            "--repository",
            str(tmp_path),
            "--http-port",
            str(http_port),
            "--grpc-port",
            str(grpc_port),
            "--metrics-port",
            str(metrics_port),
            "--door-port",
            str(door_port),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output = ""
        deadline = time.monotonic() + 120
        while "Press Ctrl-C to stop." not in output and time.monotonic() < deadline and process.poll() is None:
            output += process.stdout.readline()
        assert f"http://127.0.0.1:{http_port}" in output and f"127.0.0.1:{grpc_port}" in output, output
        for url, protocol in [(f"127.0.0.1:{grpc_port}", "grpc"), (f"127.0.0.1:{http_port}", "http")]:
            client = RadarClient(url, protocol)
            text = "A short text to classify. It has two sentences."
            result = client.classify(text)
            client.close()
            assert 0.0 <= result.score <= 1.0 and result.chunk_spans == [(0, len(text))]
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    assert process.returncode == 0, rest
    assert "stopping tritonserver" in rest
