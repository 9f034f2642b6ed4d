"""The faults a chaos run injects into the served kit, each a method that does its harm and returns what it did.

Alone: kill -9 a Python stub of any model, or tritonserver; SIGSTOP the door or a stub for a few seconds; deploy a new
version of RADAR, or a broken one that must roll back (kit.server.deploy, one deploy at a time, as an operator runs
them); a flood that fills a queue; malformed and oversized bodies. Together, as production meets them: a stub killed
while a version is deployed, and tritonserver killed while a flood through the door fills RADAR's queue. Every request a
fault sends is filed in the run's tally as the clients' are: a flood's answers are checked, its refusals counted; bad
input must be refused as bad input (a door 4xx, gRPC INVALID_ARGUMENT), retrying only what is retryable."""

from __future__ import annotations

import asyncio
import contextlib
import random
import resource
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import numpy as np
import psutil
import tritonclient.grpc.aio as grpcaio
import urllib3
from tritonclient.utils import InferenceServerException

from clients.base import ModelClient
from clients.radar import RadarClient, RadarResult, text_tensor
from kit.server.deploy import Repository, deploy
from kit.server.runtime import Stub
from perf.chaos.answers import Cases
from perf.chaos.load import PATIENT, Tally, ending
from perf.chaos.served import ServedKit
from perf.chaos.versions import linked_export, perturbed_export
from perf.engine.load import tensor

ALONE = ("kill_stub", "kill_server", "stop_stub", "stop_door", "deploy", "deploy_broken", "flood", "bad_input")
TOGETHER = ("deploy_and_kill_stub", "flood_and_kill_server")
KINDS = ALONE + TOGETHER
STOP_S = (2.0, 6.0)  # how long a SIGSTOP lasts
FLOOD_WAIT_S = 180.0  # a flooded request unanswered after this long is lost
FLOODS = {"radar": 2600, "user": 1200}  # requests at once: past radar's queue of 2,048 texts, and past 4 x the user's 256


class Faults:
    """`cases`: by role, "radar" (the clients' texts), "short" (one-chunk texts, for floods) and "user" (the user spec's
    rows); `route`: the user spec's door route."""

    def __init__(self, kit: ServedKit, tally: Tally, cases: dict[str, Cases], route: str, work: Path, log: Callable[[str], None]):
        self.kit, self.tally, self.cases, self.route, self.work, self.log = kit, tally, cases, route, work, log
        self.deploying = threading.Lock()
        self.next_version = 2

    def inject(self, kind: str, rng: random.Random) -> dict:
        return getattr(self, kind)(rng)

    # Processes.

    def victim(self, rng: random.Random) -> Stub | None:
        """A live stub of any model, or None while the server restarts and has none."""
        stubs = sorted(self.kit.seen(), key=lambda stub: stub.instance)
        return rng.choice(stubs) if stubs else None

    def kill_stub(self, rng: random.Random) -> dict:
        victim = self.victim(rng)
        if victim is None:
            return {"stub": None}
        with contextlib.suppress(psutil.NoSuchProcess):
            victim.process.kill()
        return {"stub": victim.instance}

    def kill_server(self, rng: random.Random) -> dict:
        process = self.kit.server.process
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        return {"pid": process.pid}

    def stop_stub(self, rng: random.Random) -> dict:
        victim = self.victim(rng)
        if victim is None:
            return {"stub": None}
        seconds = stopped(victim.process.pid, rng.uniform(*STOP_S))
        return {"stub": victim.instance, "stopped_s": round(seconds, 1)}

    def stop_door(self, rng: random.Random) -> dict:
        return {"stopped_s": round(stopped(self.kit.door.process.pid, rng.uniform(*STOP_S)), 1)}

    # Model updates.

    def deploy(self, rng: random.Random, broken: bool = False) -> dict:
        with self.deploying:
            version, self.next_version = self.next_version, self.next_version + 1
            folder = self.work / "versions" / f"v{version}"
            export = perturbed_export(folder) if broken else linked_export(folder)
            repo = Repository(self.kit.repository, self.kit.server.options.http_url, None, self.log)
            try:
                outcome = deploy(repo, "radar", version, export, log=self.log)
            except Exception as exc:  # a deploy that cannot finish is a figure of the run: the verdict judges it
                return {"version": version, "broken": broken, "deployed": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            finally:
                repo.close()
        return {
            "version": version,
            "broken": broken,
            "deployed": outcome.deployed,
            "step": outcome.step,
            "seconds": round(outcome.seconds, 1),
        }

    def deploy_broken(self, rng: random.Random) -> dict:
        return self.deploy(rng, broken=True)

    def deploy_and_kill_stub(self, rng: random.Random) -> dict:
        return self.during(lambda: self.deploy(rng), rng.uniform(1.0, 8.0), lambda: self.kill_stub(rng))

    # Load.

    def flood(self, rng: random.Random) -> dict:
        target = rng.choice(["radar grpc", "radar door", "user grpc"])
        return {"target": target, **self.flood_of(target)}

    def flood_and_kill_server(self, rng: random.Random) -> dict:
        return self.during(lambda: self.flood_of("radar door"), rng.uniform(0.5, 3.0), lambda: self.kill_server(rng))

    def flood_of(self, target: str) -> dict:
        model, transport = target.split()
        count = FLOODS[model]
        cases = self.cases["short" if model == "radar" else "user"]
        flood = door_flood if transport == "door" else grpc_flood
        start = time.monotonic()
        ends = asyncio.run(flood(self, cases, count))
        kind = f"flood {cases.model} {transport}"
        for outcome, detail in ends:
            self.tally.add(kind, outcome, detail)
        return {"requests": count, "seconds": round(time.monotonic() - start, 1)}

    def bad_input(self, rng: random.Random) -> dict:
        """Bodies the door must refuse as bad before Triton sees them, and requests Triton must refuse as bad."""
        door = self.kit.door.url
        http = urllib3.PoolManager(retries=False, timeout=60)
        bodies = {
            "door: JSON cut short": lambda: http.request("POST", f"{door}/v1/radar", body=b'{"text": "cut', headers=JSON),
            "door: a body declared over its cap": lambda: http.request(
                "POST", f"{door}/v1/radar", body=b"{}", headers={**JSON, "Content-Length": str(1 << 30)}
            ),
            "door: the wrong tensor shape": lambda: http.request(
                "POST", f"{door}{self.route}", json={"inputs": {"input_ids": [[1, 2]], "attention_mask": [[1]]}}
            ),
        }
        for send in bodies.values():
            self.tally.ended("bad input door", send, refused_as_bad)
        radar = RadarClient(self.kit.server.options.grpc_url, "grpc", retry=PATIENT)
        user = ModelClient(self.cases["user"].model, list(self.cases["user"].expected[0]), self.kit.server.options.grpc_url)
        requests = {
            "gRPC: a text over 1 MiB": lambda: radar.classify("x" * ((1 << 20) + 1)),
            "gRPC: a text that is not UTF-8": lambda: radar.classify(b"\xff\xfe not UTF-8"),
            "gRPC: float ids": lambda: user.infer({"input_ids": np.ones((1, 8), np.float32), "attention_mask": np.ones((1, 8))}),
        }
        try:
            for send in requests.values():
                bad_input_ended(self.tally, send)
        finally:
            radar.close()
            user.close()
        http.clear()
        return {"bodies": len(bodies) + len(requests)}

    def during(self, main: Callable[[], dict], after: float, side: Callable[[], dict]) -> dict:
        """`side()` `after` seconds into `main()`, which runs on; both figures."""
        figures: dict = {}
        thread = threading.Thread(target=lambda: figures.update(main()))
        thread.start()
        time.sleep(after)
        side_figures = side()
        thread.join()
        return {**figures, "after_s": round(after, 1), "then": side_figures}


JSON = {"Content-Type": "application/json"}


def refused_as_bad(response: urllib3.BaseHTTPResponse) -> bool:
    """A door's answer to bad input: a 4xx other than 429 (overload), with a problem body."""
    return 400 <= response.status < 500 and response.status != 429 and bool(response.json().get("detail"))


def stopped(pid: int, seconds: float) -> float:
    """SIGSTOP `pid` for `seconds`, then SIGCONT; what it was stopped for (0 where it was gone)."""
    try:
        process = psutil.Process(pid)
        process.send_signal(signal.SIGSTOP)
    except psutil.NoSuchProcess:
        return 0.0
    time.sleep(seconds)
    with contextlib.suppress(psutil.NoSuchProcess):
        process.send_signal(signal.SIGCONT)
    return seconds


def bad_input_ended(tally: Tally, send: Callable[[], object]) -> None:
    """File one request Triton must refuse as bad input: right when it does, at once or after retrying overload."""
    start = time.monotonic()
    try:
        answer = send()
    except InferenceServerException as exc:
        if "INVALID_ARG" in str(exc.status()):
            tally.add("bad input grpc", "right", seconds=time.monotonic() - start)
            return
        tally.add("bad input grpc", *ending(exc), time.monotonic() - start)
        return
    tally.add("bad input grpc", "wrong", f"answered: {str(answer)[:200]}", time.monotonic() - start)


async def grpc_flood(faults: Faults, cases: Cases, count: int) -> list[tuple[str, str]]:
    """`count` requests at once over one gRPC connection, without retries: each right, wrong, refused or lost."""
    client = grpcaio.InferenceServerClient(faults.kit.server.options.grpc_url)

    async def one(index: int) -> tuple[str, str]:
        arrays = text_tensor(cases.input(index)) if cases.model == "radar" else cases.input(index)
        try:
            result = await asyncio.wait_for(
                client.infer(cases.model, [tensor(name, value) for name, value in arrays.items()]), FLOOD_WAIT_S
            )
        except TimeoutError:
            return "lost", f"no answer within {FLOOD_WAIT_S:.0f} s"
        except InferenceServerException as exc:
            return ending(exc)
        if cases.model == "radar":
            answer = RadarResult.from_response(result)
        else:
            answer = {name: result.as_numpy(name) for name in cases.expected[0]}
        return ("right", "") if cases.check(index, answer) else ("wrong", str(answer)[:200])

    try:
        return await asyncio.gather(*(one(index) for index in range(count)))
    finally:
        await client.close()


async def door_flood(faults: Faults, cases: Cases, count: int) -> list[tuple[str, str]]:
    """`count` texts at once through the door, a connection each, without retries: a 200 is checked, a 429 or 503
    is a refusal."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # a socket per request
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 1024)), hard))
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=FLOOD_WAIT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(index: int) -> tuple[str, str]:
            try:
                async with session.post(f"{faults.kit.door.url}/v1/radar", json={"text": cases.input(index)}) as response:
                    body = await response.json(content_type=None)
            except TimeoutError:
                return "lost", f"no answer within {FLOOD_WAIT_S:.0f} s"
            except aiohttp.ClientConnectionError as exc:
                return "refused", type(exc).__name__
            if response.status in (429, 503):
                return "refused", str(response.status)
            if response.status != 200:
                return "failed", f"{response.status}: {str(body)[:200]}"
            chunks = body["chunks"]
            answer = RadarResult(body["score"], [c["score"] for c in chunks], [(c["start"], c["end"]) for c in chunks])
            return ("right", "") if cases.check(index, answer) else ("wrong", str(body)[:200])

        return await asyncio.gather(*(one(index) for index in range(count)))
