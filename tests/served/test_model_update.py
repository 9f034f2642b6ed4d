"""A new version of `radar` is loaded, checked and switched to while 64 clients keep sending, with no request
failed or answered wrong; a version whose export fails its golden set is rolled back with the old one still
serving; a door in front learns of the new version without a restart; a restart of the server serves the
version that was deployed (kit.server.deploy on a server of its own in explicit model control mode). The
tests run in order on one server: the rollback and the restart start from the version the first deployed."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import numpy as np
import pytest
import urllib3

from clients.radar import RadarClient
from clients.triton import NO_RETRY
from kit.control.profiles import load_profile
from kit.server.deploy import Repository, deploy
from kit.server.runtime import Supervisor
from perf.chaos.versions import linked_export, perturbed_export
from samples.texts import sample_texts
from tests.served.doors import running_door
from tests.served.reliability import Workers, own_server, save_result, wait_for

CLIENTS = 64


class Load(Workers):
    """`CLIENTS` threads, each sending texts to radar without retries until stopped; every answer is checked
    chunk by chunk against direct ONNX Runtime inference of the export."""

    def __init__(self, url: str, reference, texts: list[str]):
        super().__init__()
        self.url, self.reference, self.texts = url, reference, texts
        self.sent = self.answered = self.failed = self.wrong = 0
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.client, args=(i,)) for i in range(CLIENTS)]

    def client(self, index: int) -> None:
        client = RadarClient(self.url, "grpc", retry=NO_RETRY)
        try:
            n = index
            while not self.stop.is_set():
                text = self.texts[n % len(self.texts)]
                n += CLIENTS
                with self.lock:
                    self.sent += 1
                try:
                    result = client.classify(text)
                except Exception as exc:  # any failure counts, whatever its kind
                    with self.lock:
                        self.failed += 1
                        self.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                    continue
                expected = [self.reference(text[s:e]) for s, e in result.chunk_spans]
                right = bool(expected) and np.allclose(result.chunk_scores, expected, atol=1e-4, rtol=0)
                with self.lock:
                    self.answered += 1
                    self.wrong += not right
        finally:
            client.close()


def door_canary(door) -> dict:
    return urllib3.request("GET", f"{door.url}/health/ready", timeout=10).json()["canary"]


@contextlib.contextmanager
def watched(server) -> Iterator[list[str]]:
    """The kit's supervisor polling `server` every 50 ms meanwhile; its lines (a restart's among them)."""
    lines: list[str] = []
    stop = threading.Event()
    supervising = threading.Thread(target=Supervisor(server, poll=0.05, log=lines.append).run, args=(stop,))
    supervising.start()
    try:
        yield lines
    finally:
        stop.set()
        supervising.join()


@pytest.fixture(scope="module")
def updating(tmp_path_factory):
    with own_server(tmp_path_factory.mktemp("update")) as server:
        yield server


def test_radar_is_updated_under_load_with_nothing_lost_and_the_door_learns_of_it(updating, reference, tmp_path):
    server = updating
    repo = Repository(server.options.repository, server.options.http_url, None, print)
    texts = sample_texts(48, 150, 900, seed=25)
    with running_door(server.options.grpc_url, tmp_path / "door.log", "--canary-interval", "600") as door:
        assert door_canary(door)["version"] == "1"
        with Load(server.options.grpc_url, reference, texts) as load:
            assert wait_for(lambda: load.answered >= CLIENTS, 60), load.errors[:3]
            with watched(server) as restarts:  # as `make serve` runs it: the supervisor polls while the deploy loads
                outcome = deploy(repo, "radar", 2, linked_export(tmp_path / "v2"), log=print)
            settled = load.answered
            assert wait_for(lambda: load.answered >= settled + CLIENTS, 60), "answers go on after the switch"
        figures = {
            "clients": CLIENTS,
            "sent": load.sent,
            "answered": load.answered,
            "failed": load.failed,
            "wrong": load.wrong,
            "switch_seconds": round(outcome.seconds, 2),
        }
        save_result("model_update", figures)
        assert outcome.deployed, outcome.step
        assert load.failed == 0 and load.wrong == 0, (figures, load.errors[:5])
        assert load.sent - load.answered <= CLIENTS, "only the requests in flight at the stop are unanswered"
        assert repo.serving("radar") == [2] and repo.serving("radar_classifier") == [2]
        assert server.dead_stubs() == [], "the retired version's stubs were reaped, not left dead: no restart"
        assert restarts == [], "the supervisor took a stub that a load starts and ends (the config's) for a dead one"
        roles = load_profile("cpu").roles
        stubs = roles["text-texts"]["instances"] + roles["text-graph"]["instances"]
        assert len(server.stubs) >= stubs, f"the new version's stubs are watched: radar_texts' and the classifier's {stubs}"
        # The door sees version 2 answer and checks version 2's golden set, without a restart.
        urllib3.request("POST", f"{door.url}/v1/radar", json={"text": texts[0]}, timeout=30)
        assert wait_for(lambda: door_canary(door)["version"] == "2" and door_canary(door)["ok"], 30), door_canary(door)
    assert "version_policy" in (server.options.repository / "radar" / "config.pbtxt").read_text()


def test_a_version_whose_golden_set_fails_is_rolled_back_and_the_old_one_serves(updating, reference, tmp_path):
    server = updating
    repo = Repository(server.options.repository, server.options.http_url, None, print)
    before = repo.serving("radar")
    outcome = deploy(repo, "radar", 3, perturbed_export(tmp_path / "v3"), log=print)
    assert not outcome.deployed and "golden set" in outcome.step and outcome.report.max_drift > outcome.report.tolerance
    assert repo.serving("radar") == before and repo.serving("radar_classifier") == before
    assert not (server.options.repository / "radar_classifier" / "3").exists()
    text = sample_texts(1, 150, 400, seed=26)[0]
    result = RadarClient(server.options.grpc_url, "grpc", retry=NO_RETRY).classify(text)
    np.testing.assert_allclose(result.chunk_scores, [reference(text[s:e]) for s, e in result.chunk_spans], atol=1e-4)


def test_a_restarted_server_serves_the_deployed_version(updating):
    """And its stop leaves no /dev/shm region behind, those of stubs started since it started included: here the
    classifier's version 2 reloaded with one more instance, as an operator would scale it, unseen by any poll."""
    server = updating
    repo = Repository(server.options.repository, server.options.http_url, None, print)
    scaled = repo.config_on_disk("radar_classifier")
    scaled.instance_group[0].count += 1
    repo.load(scaled)
    regions = [stub.shm_region for stub in server.current_stubs() if stub.shm_region]
    server.stop()
    assert [region for region in regions if os.path.exists(f"/dev/shm/{region}")] == []
    server.start()
    assert wait_for(lambda: repo.serving("radar") == [2], 10, every=0.5), repo.serving("radar")
    assert repo.serving("radar_classifier") == [2]


def test_a_deploy_that_a_restart_cuts_short_rolls_back_once_the_server_is_back(tmp_path, reference):
    """The server dies as the deploy loads the new radar (its config on disk already names it), and the supervisor
    restarts it on the configs on disk, the new radar among them: the deploy waits for it and rolls back, step by step
    as it went up, and the old version serves and answers right."""
    step = "loading radar [2]"
    killed = []

    def log(line: str) -> None:
        print(line)
        if line == step and not killed:
            killed.append(server.process.pid)
            server.process.kill()

    with own_server(tmp_path / "server") as server, watched(server) as lines:
        repo = Repository(server.options.repository, server.options.http_url, None, log)
        outcome = deploy(repo, "radar", 2, linked_export(tmp_path / "v2"), log=log)
        assert killed and any("exited with code -9" in line for line in lines), lines
        assert not outcome.deployed and "went away" in outcome.step, outcome.step
        assert repo.serving("radar") == [1] and repo.serving("radar_classifier") == [1]
        assert not (server.options.repository / "radar" / "2").exists()
        text = sample_texts(1, 150, 400, seed=27)[0]
        result = RadarClient(server.options.grpc_url, "grpc").classify(text)
    np.testing.assert_allclose(result.chunk_scores, [reference(text[s:e]) for s, e in result.chunk_spans], atol=1e-4)
