"""Reliability settings and mechanisms that need no server: queue policies in the committed configs,
the clients' retry rule, the admin-key defaults of `make serve`, the supervisor's decisions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from clients.triton import RetryPolicy, call_with_retry, call_with_retry_async, is_retryable
from kit.control.configs import RepositoryError, parameters
from kit.control.tasks import shipped_models
from kit.server import reply_buffer
from kit.server.healthcheck import dead_stubs
from kit.server.runtime import ADMIN_APIS, ServerError, Supervisor, restricted_api_args
from kit.server.serve import ADMIN_KEY_ENV, admin_key
from perf.sim.device import SIM
from tests.fake_proc import fake_process
from tests.profiles import canonical, configs, variant


@pytest.mark.parametrize("model", shipped_models())
def test_every_batched_model_has_a_bounded_rejecting_queue(model):
    """Applies to every model the kit ships, including ones added later."""
    config = canonical()[model].config
    if config.max_batch_size == 0 and not config.HasField("dynamic_batching"):
        pytest.skip(f"{model} does not batch")
    policy = config.dynamic_batching.default_queue_policy
    assert 0 < policy.max_queue_size <= 4096, f"{model}: unbounded queue"
    assert policy.timeout_action == mc.ModelQueuePolicy.REJECT
    assert 0 < policy.default_timeout_microseconds <= 60_000_000, f"{model}: no queue timeout"


def test_radar_entry_bounds_its_queue_too():
    """The `radar` ensemble has no queue of its own: the model of its step, which holds the texts, bounds it."""
    (step,) = canonical()["radar"].config.ensemble_scheduling.step
    assert canonical()[step.model_name].config.dynamic_batching.default_queue_policy.max_queue_size > 0


@pytest.mark.parametrize("profile", ["cpu", "gpu", "gpu-embedded", SIM / "sim-h100.json"])
def test_a_network_without_a_queue_policy_is_bounded_by_its_caller(profile):
    """The GPU profiles take the policy of radar_classifier and resnet50_backbone away (it stops Triton's batcher from
    gathering the next batch while the device runs one); their only callers keep them bounded: radar_texts by a
    window of chunks, resnet50 by awaiting its calls within each execution, each with a bounded queue of its own."""
    built = configs(profile)
    unbounded = {
        name
        for name, c in built.items()
        if c.HasField("dynamic_batching") and not c.dynamic_batching.default_queue_policy.max_queue_size
    }
    assert unbounded == (set() if profile == "cpu" else {"radar_classifier", "resnet50_backbone"})
    assert int(parameters(built["radar_texts"])["batches_in_flight"]) > 0
    assert parameters(built["resnet50"])["backbone"] == "resnet50_backbone"
    for caller in ("radar_texts", "resnet50"):
        assert 0 < built[caller].dynamic_batching.default_queue_policy.max_queue_size <= 4096


@pytest.mark.parametrize(
    "model, setting",
    [
        ("ocr_rec", {"queue_policy": False}),
        ("radar_texts", {"queue_policy": False}),
        ("resnet50", {"queue_policy": False}),
        ("radar_classifier", {"queue_policy": "no"}),
        ("radar_classifier", {"queue_policy": False, "default_timeout_microseconds": 1000}),
    ],
)
def test_the_build_refuses_a_queue_that_nothing_bounds(tmp_path, model, setting):
    spec = json.loads((SIM / "sim-h100.json").read_text())
    spec["models"][model] = spec["models"].get(model, {}) | setting
    with pytest.raises(RepositoryError, match="queue"):
        configs(variant(tmp_path, spec, "sim-h100"))


OVERLOADED = InferenceServerException("Exceeds maximum queue size", status="StatusCode.UNAVAILABLE")
BAD_INPUT = InferenceServerException("TEXT is not valid UTF-8", status="StatusCode.INVALID_ARGUMENT")


@pytest.mark.parametrize(
    "error, retry",
    [
        (OVERLOADED, True),
        (InferenceServerException("Request timeout expired", status="503"), True),
        (ConnectionRefusedError(111, "Connection refused"), True),
        (BAD_INPUT, False),
        (InferenceServerException("bad", status="400"), False),
        (InferenceServerException("Stub process 'x' is not healthy.", status="StatusCode.INTERNAL"), True),
        (InferenceServerException("in ensemble 'radar', Stub process 'x_0_1' is not healthy.", status="500"), True),
        (InferenceServerException("Failed to process the request(s)", status="StatusCode.INTERNAL"), False),
        (InferenceServerException("Request for unknown model: 'radar' has no available versions", status="400"), True),
        (InferenceServerException("Request for unknown model: 'radr' is not found", status="StatusCode.NOT_FOUND"), False),
        (InferenceServerException("This protocol is restricted, expecting header", status="StatusCode.UNAVAILABLE"), False),
        (ValueError("a bug"), False),
    ],
)
def test_only_overload_a_restarting_server_and_a_dead_stub_are_retryable(error, retry):
    assert is_retryable(error) is retry


def test_backoff_is_bounded_full_jitter():
    policy = RetryPolicy(attempts=10, base=0.1, cap=1.0)
    for _ in range(50):
        delays = list(policy.delays())
        assert len(delays) == 9
        assert all(0 <= d <= min(1.0, 0.1 * 2**n) for n, d in enumerate(delays))


def failing(errors, result="ok"):
    calls = []

    def call():
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    return call, calls


def test_retry_recovers_from_overload_and_counts_retries():
    call, calls = failing([OVERLOADED, OVERLOADED])
    seen = []
    assert call_with_retry(call, RetryPolicy(attempts=5, base=0.001), lambda exc, delay: seen.append(exc)) == "ok"
    assert len(calls) == 3 and seen == [OVERLOADED, OVERLOADED]


def test_retry_never_repeats_bad_input_and_gives_up_after_its_attempts():
    call, calls = failing([BAD_INPUT])
    with pytest.raises(InferenceServerException):
        call_with_retry(call, RetryPolicy(attempts=5, base=0.001))
    assert len(calls) == 1
    call, calls = failing([OVERLOADED] * 10)
    with pytest.raises(InferenceServerException):
        call_with_retry(call, RetryPolicy(attempts=4, base=0.001))
    assert len(calls) == 4


def test_async_retry_follows_the_same_rule():
    errors = [OVERLOADED]

    async def call():
        if errors:
            raise errors.pop()
        return "ok"

    assert asyncio.run(call_with_retry_async(call, RetryPolicy(attempts=3, base=0.001))) == "ok"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_serve_needs_no_admin_key(host):
    assert admin_key(host, {}) == (None, False)


def test_exposed_serve_generates_an_admin_key_unless_one_is_given():
    key, generated = admin_key("0.0.0.0", {})
    assert generated and len(key) >= 32
    assert admin_key("0.0.0.0", {ADMIN_KEY_ENV: "chosen"}) == ("chosen", False)
    assert admin_key("127.0.0.1", {ADMIN_KEY_ENV: "chosen"}) == ("chosen", False)


def test_admin_key_restricts_the_admin_apis_on_both_protocols():
    assert restricted_api_args(None) == []
    http, grpc = restricted_api_args("k")
    for arg, flag in ((http, "--http-restricted-api="), (grpc, "--grpc-restricted-protocol=")):
        assert arg.startswith(flag) and arg.endswith(":triton-admin-key=k")
        assert set(arg[len(flag) :].split(":")[0].split(",")) == set(ADMIN_APIS)
    assert "inference" not in ADMIN_APIS and "health" not in ADMIN_APIS


class FakeProcess:
    def __init__(self):
        self.code = None

    def poll(self):
        return self.code


class FakeServer:
    """Stands in for kit.server.runtime.TritonServer (the supervisor's own collaborator, not Triton)."""

    def __init__(self):
        self.process, self.dead, self.ready, self.starts = FakeProcess(), [], True, 0

    def dead_stubs(self):
        return self.dead

    def is_ready(self):
        return self.ready

    def stop(self, timeout):
        self.process = FakeProcess()

    def start(self):
        self.starts += 1
        self.dead, self.ready = [], True


def test_supervisor_restarts_for_a_dead_stub_or_exit_at_once_and_for_unreadiness_after_grace(monkeypatch):
    server = FakeServer()
    supervisor = Supervisor(server, grace=10.0, log=lambda line: None)
    assert supervisor.problem() is None
    server.dead = ["radar_classifier_0_1"]
    assert "radar_classifier_0_1" in supervisor.problem()
    server.dead, server.process.code = [], -9
    assert "exited with code -9" in supervisor.problem()
    server.process.code, server.ready = None, False
    now = [1000.0]
    monkeypatch.setattr("kit.server.runtime.time.monotonic", lambda: now[0])
    assert supervisor.problem() is None
    now[0] += 11
    assert "not ready" in supervisor.problem()


def test_supervisor_gives_up_when_restarts_do_not_help(monkeypatch):
    server = FakeServer()
    supervisor = Supervisor(server, max_restarts=2, window=60, log=lambda line: None)
    monkeypatch.setattr("kit.server.runtime.time.monotonic", lambda: 5.0)
    supervisor.restart("stub died")
    supervisor.restart("stub died")
    with pytest.raises(ServerError, match="giving up after 2 restarts"):
        supervisor.restart("stub died")
    assert server.starts == 2


def test_healthcheck_finds_zombie_stubs_of_a_tritonserver(tmp_path):
    fake_process(tmp_path, 100, "tritonserver", "S", 1)
    fake_process(tmp_path, 101, "triton_python_b", "Z", 100)  # died, not reaped: the case Triton ignores
    fake_process(tmp_path, 102, "triton_python_b", "S", 100)
    fake_process(tmp_path, 103, "triton_python_b", "Z", 7)  # another parent
    fake_process(tmp_path, 104, "a (weird) name", "Z", 100)
    assert dead_stubs(proc=tmp_path) == [101]
    assert dead_stubs(7, proc=tmp_path) == [103]


def test_the_reply_buffer_is_raised_where_it_may_be_and_explained_where_it_may_not(tmp_path):
    setting = tmp_path / "wmem_default"
    setting.write_text("212992\n")
    assert f"{reply_buffer.replies_at_once(212992):,} refusals" in reply_buffer.advice(212992)
    said = reply_buffer.raise_setting(setting)
    assert said.startswith("raised") and int(setting.read_text()) == reply_buffer.WANTED
    assert reply_buffer.advice(reply_buffer.current(setting)) is None
    assert reply_buffer.raise_setting(setting).startswith("net.core.wmem_default is")  # high enough: left alone
    assert "not readable" in reply_buffer.raise_setting(tmp_path / "missing")
    # A kernel file that is read-only even for root, as wmem_default is inside a container.
    read_only = Path("/proc/sys/fs/file-nr")
    before = read_only.read_text()
    assert reply_buffer.raise_setting(read_only).startswith("warning: net.core.wmem_default is")
    assert read_only.read_text().split()[2] == before.split()[2]
