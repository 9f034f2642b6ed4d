"""`make serve` starts the front door beside Triton (Triton's ports on loopback, the door on its own
port), the door answers with Triton's models behind it, and Ctrl-C stops both cleanly."""

import signal
import subprocess
import sys
import time

import urllib3

from clients.door import DoorClient
from kit.server.runtime import free_ports
from tests.conftest import REPO_ROOT


def test_serve_starts_the_door_beside_triton_and_stops_both_on_ctrl_c(tmp_path, radar_artifacts):
    ports = free_ports(4)
    names = ("--http-port", "--grpc-port", "--metrics-port", "--door-port")
    command = [sys.executable, "-m", "kit.server.serve", "--repository", str(tmp_path)]
    command += [arg for name, port in zip(names, ports) for arg in (name, str(port))]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    door = f"http://127.0.0.1:{ports[3]}"
    try:
        output = ""
        deadline = time.monotonic() + 150
        while "Press Ctrl-C to stop." not in output and time.monotonic() < deadline and process.poll() is None:
            output += process.stdout.readline()
        assert f"door     {door}" in output, output
        assert "X-API-Key" not in output, "no key on loopback"
        text = "A short text to classify. It has two sentences."
        assert DoorClient(door).classify(text).chunk_spans == [(0, len(text))]
        assert urllib3.request("GET", f"{door}/health/ready", retries=False).status == 200
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    assert process.returncode == 0, rest
    assert "stopping tritonserver and the door" in rest
    try:
        urllib3.request("GET", f"{door}/health/live", retries=False, timeout=2)
        raise AssertionError("the door still answers after serve stopped")
    except urllib3.exceptions.HTTPError:
        pass
