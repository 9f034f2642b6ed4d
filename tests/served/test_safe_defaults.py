"""With an admin key (what `make serve --host 0.0.0.0` sets), the endpoints that change or reveal
server state need the key on both protocols, inference and health stay open, and loading or
unloading a model (explicit model control, kit.server.deploy) is done with the key alone."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from clients.radar import RadarClient
from kit.control.configs import REPO_ROOT
from kit.server.runtime import ADMIN_HEADER, GRPC_ADMIN_HEADER
from tests.served import doors
from tests.served.reliability import own_server, wait_for

KEY = "test-admin-key"
ADMIN_HTTP = [
    ("POST", "/v2/repository/index"),
    ("POST", "/v2/repository/models/radar/unload"),
    ("GET", "/v2/logging"),
    ("GET", "/v2/trace/setting"),
    ("GET", "/v2/systemsharedmemory/status"),
    ("GET", "/v2/models/stats"),
]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, radar_artifacts):
    with own_server(tmp_path_factory.mktemp("guarded"), admin_key=KEY) as server:
        yield server


def http_status(server, method, path, headers=None):
    request = urllib.request.Request(
        f"http://{server.options.http_url}{path}", method=method, headers=headers or {}, data=b"{}" if method == "POST" else None
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.parametrize("method, path", ADMIN_HTTP)
def test_http_admin_endpoints_need_the_key(guarded, method, path):
    status, body = http_status(guarded, method, path)
    assert status == 403 and ADMIN_HEADER in body
    assert http_status(guarded, method, path, {ADMIN_HEADER: "wrong"})[0] == 403
    status, body = http_status(guarded, method, path, {ADMIN_HEADER: KEY})
    assert status == 200, body
    if path.endswith("/unload"):  # explicit model control: with the key a model is unloaded, and loaded again
        assert wait_for(lambda: http_status(guarded, "GET", "/v2/models/radar/ready")[0] != 200, 30)
        load = "/v2/repository/models/radar/load"
        assert http_status(guarded, "POST", load)[0] == 403
        assert http_status(guarded, "POST", load, {ADMIN_HEADER: KEY})[0] == 200
        assert http_status(guarded, "GET", "/v2/models/radar/ready")[0] == 200


def test_grpc_admin_calls_need_the_key(guarded):
    client = grpcclient.InferenceServerClient(guarded.options.grpc_url)
    calls = [
        client.get_log_settings,
        client.get_model_repository_index,
        client.get_inference_statistics,
        client.get_system_shared_memory_status,
        client.get_trace_settings,
    ]
    for call in calls:
        with pytest.raises(InferenceServerException, match="restricted"):
            call()
        call(headers={GRPC_ADMIN_HEADER: KEY})
    with pytest.raises(InferenceServerException, match="restricted"):
        client.unload_model("radar")
    client.unload_model("radar", headers={GRPC_ADMIN_HEADER: KEY})
    assert wait_for(lambda: not client.is_model_ready("radar"), 30)
    client.load_model("radar", headers={GRPC_ADMIN_HEADER: KEY})
    assert client.is_model_ready("radar")
    client.close()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_inference_health_and_metadata_stay_open(guarded, protocol):
    url = guarded.options.grpc_url if protocol == "grpc" else guarded.options.http_url
    client = RadarClient(url, protocol)
    assert 0.0 <= client.classify("An open inference endpoint. Nothing else.").score <= 1.0
    client.close()
    assert http_status(guarded, "GET", "/v2/health/ready")[0] == 200
    assert http_status(guarded, "GET", "/v2/models/radar")[0] == 200


def test_a_door_reads_the_model_index_with_the_key_and_says_so_without_it(guarded, tmp_path):
    """The door asks Triton's model index (an admin API) which models have routes: with the key it serves them
    (kit.server.serve passes the key on); without it, it stops at start with the fix in its error."""
    with doors.running_door(guarded.options.grpc_url, tmp_path / "door.log", env={"DOOR_TRITON_ADMIN_KEY": KEY}) as door:
        answer = doors.call(door, "POST", "/v1/radar", json={"text": "Served behind a guarded Triton."})
        assert answer.status == 200, answer.data[:300]
    refused = subprocess.run(
        [sys.executable, "-m", "door", "--triton", guarded.options.grpc_url, "--wait", "10"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={name: value for name, value in os.environ.items() if name != "DOOR_TRITON_ADMIN_KEY"},
    )
    assert refused.returncode == 2 and "DOOR_TRITON_ADMIN_KEY" in refused.stderr, refused.stderr[-2000:]
