"""The front door's parts that need no server: Retry-After, API keys, what Triton's errors become, and the
contract read from the configs a build writes (the same function reads Triton's served configs)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shutil
from pathlib import Path

import pytest
from tritonclient.utils import InferenceServerException

from door.cli import environment_of, parse_args, settings_from
from door.contract import ANSWERS, ContractError, contract_from_configs
from door.flow import Flow
from door.health import StubBook, readiness
from door.settings import DoorSettings, SettingsError, api_keys
from door.upstream import Upstream
from kit.adapters.settings import PipelineSettings, PixelClassifierSettings, TextSettings
from kit.control.configs import SOURCE, RepositoryError, copy_config, parameters, set_parameter
from kit.control.specs import DOOR_ANSWER, DOOR_ANSWERS, DOOR_ROUTE, TENSORS, read_spec
from kit.control.tasks import shipped_models
from kit.server.runtime import GRPC_ADMIN_HEADER
from kit.server.serve import door_key
from tests.fake_proc import fake_process
from tests.profiles import configs as built_configs

DOOR = Path(__file__).resolve().parents[2] / "door"


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture(scope="module")
def configs(radar_artifacts):
    return built_configs("cpu")


def test_retry_after_is_the_time_to_drain_the_work_in_flight_at_the_recent_rate():
    clock = Clock()
    flow = Flow(window=10.0, cap=30, clock=clock)
    assert flow.retry_after() == 1, "with no answer yet the rate is unknown: the shortest wait"
    for _ in range(20):  # 20 answers in 10 s: 2 per second
        flow.start()
        clock.now += 0.5
        flow.finish(answered=True)
    for _ in range(9):
        flow.start()
    assert flow.rate() == 2.0
    assert flow.retry_after() == 5  # (9 in flight + the caller) / 2 per second
    for _ in range(200):
        flow.start()
    assert flow.retry_after() == 30, "capped"
    clock.now += 10.5
    assert flow.rate() is None and flow.retry_after() == 1, "answers older than the window are forgotten"


def test_a_young_door_measures_its_rate_over_the_time_it_has_run():
    clock = Clock()
    flow = Flow(window=10.0, clock=clock)
    for _ in range(6):
        flow.start()
    clock.now += 2.0
    for _ in range(6):
        flow.finish(answered=True)
    assert flow.rate() == 3.0, "6 answers in its first 2 s, not 6 in 10 s"


def test_refusals_do_not_count_as_answers():
    flow = Flow(clock=Clock())
    flow.start()
    flow.finish(answered=False)
    assert flow.in_flight == 0 and flow.rate() is None


def test_a_flow_keeps_only_its_windows_answers_however_many_it_has_answered():
    """A door that is never refused never asks the rate; its answers' times must not pile up for its lifetime."""
    clock = Clock()
    flow = Flow(window=10.0, clock=clock)
    for _ in range(10_000):
        flow.start()
        flow.finish(answered=True)
        clock.now += 0.1
    assert len(flow.answers) <= 101, f"{len(flow.answers)} answers kept for a 10 s window at 10 a second"
    assert flow.rate() == 10.0


def test_api_keys_are_off_on_loopback_and_required_beyond_it():
    assert api_keys("127.0.0.1", {}) == frozenset()
    assert api_keys("::1", {"DOOR_API_KEYS": "a, b,"}) == {"a", "b"}
    with pytest.raises(SettingsError, match="DOOR_API_KEYS"):
        api_keys("0.0.0.0", {})
    assert api_keys("0.0.0.0", {}, disabled=True) == frozenset()


def test_api_keys_are_read_from_a_file(tmp_path):
    path = tmp_path / "keys"
    path.write_text("first\n\n second \n")
    assert api_keys("0.0.0.0", {"DOOR_API_KEYS_FILE": str(path)}) == {"first", "second"}
    with pytest.raises(SettingsError):
        api_keys("127.0.0.1", {"DOOR_API_KEYS_FILE": str(tmp_path / "missing")})


def test_serve_generates_a_door_key_only_beyond_loopback_without_one():
    assert door_key("127.0.0.1", {}) is None
    assert door_key("0.0.0.0", {"DOOR_API_KEYS": "k"}) is None
    assert len(door_key("0.0.0.0", {})) >= 32


def problem_for(status: str, message: str, flow_answers: int = 0):
    upstream = Upstream(DoorSettings(), contract_from_configs({}))
    upstream.flows["radar"] = flow = Flow(clock=(clock := Clock()))
    for _ in range(flow_answers):
        flow.start()
        clock.now += 2.0
        flow.finish(answered=True)
    return upstream.problem("radar", InferenceServerException(message, status))


@pytest.mark.parametrize(
    "status, message, code, kind",
    [
        ("StatusCode.UNAVAILABLE", "Exceeds maximum queue size", 429, "overloaded"),
        ("StatusCode.UNAVAILABLE", "radar failed: radar_classifier: Request timeout expired", 429, "overloaded"),
        ("StatusCode.UNAVAILABLE", "failed to connect to all addresses", 503, "unavailable"),
        ("StatusCode.INTERNAL", "Stub process 'radar_0_1' is not healthy.", 503, "unavailable"),
        ("StatusCode.NOT_FOUND", "Request for unknown model: 'radar' has no available versions", 503, "unavailable"),
        ("StatusCode.NOT_FOUND", "Request for unknown model: 'radr' is not found", 502, "upstream-error"),
        ("StatusCode.INVALID_ARGUMENT", "TEXT is not UTF-8", 422, "invalid-input"),
        ("StatusCode.DEADLINE_EXCEEDED", "Deadline Exceeded", 504, "upstream-timeout"),
        ("StatusCode.INTERNAL", "inference failed", 502, "upstream-error"),
    ],
)
def test_tritons_answers_become_statuses_a_client_can_act_on(status, message, code, kind):
    problem = problem_for(status, message)
    assert (problem.status, problem.kind) == (code, kind)
    assert message in problem.detail
    assert ("Retry-After" in problem.headers) == (code in (429, 503))


def test_a_full_queue_is_answered_with_the_measured_retry_after():
    problem = problem_for("StatusCode.UNAVAILABLE", "Exceeds maximum queue size", flow_answers=5)
    assert problem.headers["Retry-After"] == "2"  # (0 in flight + 1) / 0.5 per second


def test_limits_come_from_the_built_configs_through_the_models_typed_settings(configs):
    contract = contract_from_configs(configs)
    assert set(contract.models) == {"radar", "ocr", "health_code", "resnet50"}
    expected = {
        "radar": TextSettings,
        "ocr": PipelineSettings,
        "health_code": PipelineSettings,
        "resnet50": PixelClassifierSettings,
    }
    for model, kind in expected.items():
        assert contract[model].settings == kind.from_parameters(parameters(configs[model]))
    assert contract["radar"].settings.max_text_bytes == int(parameters(configs["radar"])["max_text_bytes"])
    assert contract["resnet50"].batched and contract["resnet50"].dims["INPUT"] == (3, -1, -1)
    assert not contract["radar"].batched
    for model in ("ocr", "health_code"):  # health_code's limits are its own; the rest it reads as `ocr` does
        own = parameters(configs[model])
        assert contract[model].image_limits == (int(own["max_image_bytes"]), int(own["max_pixels"]))


def test_a_model_without_its_routes_tensors_stops_the_door(configs):
    renamed = copy_config(configs["radar"])
    renamed.input[0].name = "TEXTS"
    with pytest.raises(ContractError, match="no input 'TEXT'"):
        contract_from_configs({**configs, "radar": renamed})
    retyped = copy_config(configs["resnet50"])
    retyped.input[0].dims[:] = [3, 224, 224]
    with pytest.raises(ContractError, match="INPUT"):
        contract_from_configs({**configs, "resnet50": retyped})


def test_a_model_the_server_does_not_serve_gets_no_route(configs):
    contract = contract_from_configs({"radar": configs["radar"]})
    assert set(contract.models) == {"radar"}


def test_a_route_comes_from_its_configs_parameters_whatever_the_models_name(configs):
    """The door serves what a config names (route, answer, description), not a model it knows by name."""
    renamed = copy_config(configs["radar"])
    renamed.name = "detector"
    set_parameter(renamed, DOOR_ROUTE, "/v1/detector")
    contract = contract_from_configs({"detector": renamed})
    assert contract["detector"].route == "/v1/detector" and contract["detector"].answer == "text-score"
    assert contract.canary_model == "detector" and contract.canary is not None
    unrouted = copy_config(configs["ocr"])
    del unrouted.parameters[DOOR_ROUTE]
    assert set(contract_from_configs({"ocr": unrouted}).models) == set()


def test_an_answer_the_door_does_not_give_stops_the_build_and_the_door(configs):
    assert set(ANSWERS) | {TENSORS} == set(DOOR_ANSWERS)
    wrong = copy_config(configs["ocr"])
    set_parameter(wrong, DOOR_ANSWER, "image-poem")
    with pytest.raises(ContractError, match="door_answer 'image-poem' is not one of"):
        contract_from_configs({"ocr": wrong})
    spec = SOURCE / "ocr.toml"
    with pytest.raises(RepositoryError, match="`door_answer` is 'image-poem'; it is one of"):
        read_spec(spec, spec.read_text().replace('door_answer = "image-lines"', 'door_answer = "image-poem"'))
    spec = SOURCE / "health_code.toml"
    with pytest.raises(RepositoryError, match="`door_schema` goes with door_answer image-document"):
        read_spec(spec, spec.read_text().replace('door_schema = "health_code.schema.json"', ""))


def test_two_golden_sets_are_refused_rather_than_one_left_unchecked(configs):
    twin = copy_config(configs["radar"])
    set_parameter(twin, DOOR_ROUTE, "/v1/twin")
    with pytest.raises(ContractError, match="golden set of one model"):
        contract_from_configs({"radar": configs["radar"], "twin": twin})


def test_the_door_names_no_model():
    """Every route comes from a served config; the door's code names none of the shipped models."""
    shipped = shipped_models()
    pattern = re.compile("|".join(rf"\b{re.escape(name)}\b" for name in shipped + ["health-code"]), re.IGNORECASE)
    found = [f"{path.name}: {m.group()}" for path in DOOR.glob("*.py") for m in pattern.finditer(path.read_text())]
    assert found == []


def test_readiness_looks_only_at_the_stubs_of_the_server_on_the_doors_port(tmp_path):
    fake_process(tmp_path, 10, "tritonserver", "S", 1, ["tritonserver", "--grpc-port=9001"])
    fake_process(tmp_path, 11, "triton_python_b", "Z", 10)
    fake_process(tmp_path, 12, "triton_python_b", "S", 10)
    fake_process(tmp_path, 20, "tritonserver", "S", 1, ["tritonserver", "--grpc-port", "9002"])
    fake_process(tmp_path, 21, "triton_python_b", "Z", 20)
    fake_process(tmp_path, 30, "tritonserver", "S", 1, ["tritonserver", "--model-repository=/models"])
    assert StubBook("9001", tmp_path).look() == ([], [11], True), "a zombie never seen alive counts as dead"
    assert StubBook("9002", tmp_path).look() == ([], [21], True)
    assert StubBook("8001", tmp_path).look() == ([], [], True), "Triton's default port when the command line names none"
    assert StubBook("9999", tmp_path).look() == ([], [], False), "a server the door cannot see is said to be unseen"


def stub(proc: Path, pid: int, state: str, version: int, instance: str, ticks: int) -> None:
    args = ["/x/triton_python_backend_stub", f"/repo/scorer/{version}/model.py", "shm", "1", "10", "/b", instance, "python"]
    fake_process(proc, pid, "triton_python_b", state, 10, args, ticks)


class Versions:
    """The door's upstream as readiness asks it: the server and each model ready, and which versions serve."""

    contract = None

    def __init__(self, serving: set[str]):
        self.serving = serving

    async def readiness(self) -> dict[str, bool]:
        return {"server": True}

    async def version_ready(self, model: str, version: str) -> bool | None:
        return f"{model}/{version}" in self.serving


def ready(book: StubBook, serving: set[str]) -> dict:
    return asyncio.run(readiness(Versions(serving), None, book))


def test_a_dead_stub_counts_while_its_version_serves_and_nothing_took_its_place(tmp_path):
    """The door judges an ended stub as the supervisor does: by the version and instance it served, which only its
    command line while it lived says."""
    fake_process(tmp_path, 10, "tritonserver", "S", 1, ["tritonserver", "--grpc-port=9001"])
    stub(tmp_path, 11, "S", 1, "scorer_0_0", ticks=100)
    stub(tmp_path, 12, "S", 2, "scorer_0_0", ticks=200)
    stub(tmp_path, 13, "S", 2, "scorer", ticks=210)  # the stub that completes v2's config: no instance
    book = StubBook("9001", tmp_path)
    assert ready(book, {"scorer/1"})["ready"]
    stub(tmp_path, 11, "Z", 1, "scorer_0_0", ticks=100)  # killed while v1 serves
    stub(tmp_path, 12, "Z", 2, "scorer_0_0", ticks=200)  # killed while v2 loaded, then unloaded by the roll-back
    stub(tmp_path, 13, "Z", 2, "scorer", ticks=210)
    answer = ready(book, {"scorer/1"})
    assert (answer["ready"], answer["dead_stubs"]) == (False, [11])
    stub(tmp_path, 14, "S", 1, "scorer_0_0", ticks=300)  # a reload's new stub for the instance
    assert ready(book, {"scorer/1"})["dead_stubs"] == []
    shutil.rmtree(tmp_path / "14")  # reaped by Triton: gone, not a zombie, and v1 still serves
    assert ready(book, {"scorer/1"})["dead_stubs"] == [14]
    stub(tmp_path, 14, "S", 1, "scorer_0_0", ticks=400)  # the pid taken by a later stub of the instance
    assert ready(book, {"scorer/1"})["dead_stubs"] == []
    assert book.look() == ([], [], True), "the zombies whose end was no death are not judged again"


def test_every_door_setting_is_a_flag_and_an_environment_variable_and_the_flag_wins():
    environ = {"DOOR_TRITON_TIMEOUT": "7.5", "DOOR_RATE_WINDOW": "4", "DOOR_MAX_RETRY_AFTER": "9", "DOOR_PORT": "9000"}
    settings = settings_from(parse_args(["--max-retry-after", "12", "--cors-origins", "https://a.example"], environ), environ)
    assert (settings.triton_timeout, settings.rate_window, settings.max_retry_after) == (7.5, 4.0, 12)
    assert settings.cors_origins == ("https://a.example",)
    assert parse_args([], environ).port == 9000
    for field in dataclasses.fields(DoorSettings):
        if field.name not in DoorSettings.FROM_ENVIRONMENT:
            value = "3" if field.metadata["parse"] in (int, float) else "x.example:1"
            given = settings_from(parse_args([], {f"DOOR_{field.name.upper()}": value}), {})
            assert str(getattr(given, field.name)).strip("(),'") in (value, f"{value}.0"), field.name
    with pytest.raises(SettingsError, match="triton timeout"):
        settings_from(parse_args(["--triton-timeout", "0"], {}), {})
    with pytest.raises(SettingsError, match="shared memory mb must be 0"):
        settings_from(parse_args(["--shared-memory-mb", "-1"], {}), {})
    off = settings_from(parse_args(["--shared-memory-mb", "0"], {}), {})  # 0: off, allowed
    assert off.shared_memory_mb == 0 and off.admin_headers is None  # without a key, no admin header
    keyed = settings_from(parse_args([], {"DOOR_TRITON_ADMIN_KEY": "k"}), {})
    assert keyed.admin_headers == {GRPC_ADMIN_HEADER: "k"}
    assert settings_from(parse_args([], {"DOOR_NO_API_KEYS": "yes", "DOOR_HOST": "0.0.0.0"}), {}).api_keys == frozenset()


def test_a_workers_environment_gives_it_the_options_the_door_was_started_with():
    argv = [
        "--port",
        "9001",
        "--triton-timeout",
        "7.5",
        "--cors-origins",
        "https://a.example",
        "--cors-origins",
        "https://b.example",
    ]
    args = parse_args([*argv, "--no-api-keys", "--workers", "3"], {})
    worker = parse_args([], environment_of(args))
    assert vars(worker) | {"workers": 3} == vars(args), "every option but the worker count reaches each worker"
    assert settings_from(worker, {}) == settings_from(args, {})


def test_a_flow_tells_its_watchers_every_change_of_its_requests_in_flight():
    flow, seen = Flow(clock=Clock()), []
    flow.watchers.append(seen.append)
    flow.start()
    flow.start()
    flow.finish(answered=True)
    flow.finish(answered=False)
    assert seen == [1, 2, 1, 0]
