"""A chaos run: the served kit under closed-loop clients of texts, images and a user spec's model, through the door and
over gRPC, with the clients' own retry policy, while a seeded scheduler injects a fault every 20-60 s; then the
verdict (perf.chaos.report) and its figures.

    python -m perf chaos [--seconds 1200] [--seed 40] [--out build/reliability/chaos.json]   # make chaos

The user's model is added as a user adds one, by `kit add` (an `onnx` spec of the RADAR stand-in's graph: token ids
in, logits out), and served beside RADAR and resnet50 by the CPU profile. The faults come from a deck of every kind
(perf.chaos.faults), shuffled by the seed and dealt in turn, so that a run of a few minutes meets several kinds and a
longer one every kind, some more than once; each runs on a thread of its own, so that a long one (a deploy, a
flood) is still going when the next comes."""

from __future__ import annotations

import random
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tritonclient.utils import InferenceServerException

from kit.control.configs import ARTIFACTS, REPO_ROOT
from kit.control.models import main as kit_main
from kit.control.specs import ModelSpec, read_specs
from kit.server.deploy import GONE, Repository
from perf.chaos import answers, report
from perf.chaos.faults import KINDS, Faults
from perf.chaos.load import ClosedLoop, Kind, Tally, radar, resnet50, tensors
from perf.chaos.served import ServedKit
from perf.chaos.watch import Watch

USER_MODEL = "chaos_scorer"
# The 64 clients: RADAR's texts most, as the kit's main load; images, which cost the most per request, fewest.
MIX = {("radar", "grpc"): 20, ("radar", "door"): 14, ("resnet50", "grpc"): 6, ("resnet50", "door"): 4}
USER_MIX = {"grpc": 12, "door": 8}
SETTLE_S = 30.0  # left out of the memory figures: the servers' first allocations under load
READY_WAIT_S = 300.0  # for the kit to be ready at the end, after the last fault


@dataclass
class Options:
    seconds: float = 1200.0
    seed: int = 40
    interval: tuple[float, float] = (20.0, 60.0)  # seconds between faults, uniform
    grace: float = 240.0  # seconds the requests in flight at the end have to end
    work: Path = field(default_factory=lambda: REPO_ROOT / "build" / "chaos")


def schedule(options: Options) -> list[tuple[float, str, int]]:
    """(seconds into the run, fault kind, the fault's own seed), from the run's seed alone."""
    rng = random.Random(options.seed)
    plan, deck, at = [], [], rng.uniform(*options.interval)
    while at < options.seconds:
        if not deck:
            deck = list(KINDS)
            rng.shuffle(deck)
        plan.append((round(at, 1), deck.pop(), rng.randrange(1 << 32)))
        at += rng.uniform(*options.interval)
    return plan


def user_spec(folder: Path) -> ModelSpec:
    """The user's model, added by `kit add` into a specs folder of the run's own."""
    graph = ARTIFACTS / "radar" / "model.onnx"
    if kit_main(["add", USER_MODEL, "--task", "onnx", "--from", str(graph), "--models", str(folder), "--replace"]) != 0:
        raise RuntimeError(f"kit add {USER_MODEL} failed (see above)")
    return read_specs(folder)[USER_MODEL]


def kinds_of(cases: dict[str, answers.Cases], spec: ModelSpec) -> list[Kind]:
    connect = {"radar": radar, "resnet50": resnet50}
    kinds = [Kind(cases[model], transport, n, connect[model]) for (model, transport), n in MIX.items()]
    user = tensors(spec.name, list(cases["user"].expected[0]), spec.door_route)
    return kinds + [Kind(cases["user"], transport, n, user) for transport, n in USER_MIX.items()]


class Injections:
    """The faults of a run as they happen: each on a thread of its own, with its times and what it did."""

    def __init__(self, faults: Faults, log):
        self.faults, self.log = faults, log
        self.done: list[dict] = []
        self.threads: list[threading.Thread] = []

    def start(self, at: float, kind: str, seed: int) -> None:
        def inject():
            started = time.monotonic()
            self.log(f"fault at {at:.0f} s: {kind}")
            try:
                detail = self.faults.inject(kind, random.Random(seed))
            except Exception as exc:  # a fault that could not be injected is recorded, and fails the verdict
                detail = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            self.log(f"fault {kind} ended: {detail}")
            self.done.append(
                {"kind": kind, "at_s": at, "started": started, "took_s": round(time.monotonic() - started, 1), **detail}
            )

        thread = threading.Thread(target=inject, name=f"fault {kind}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def join(self, timeout: float) -> list[str]:
        """Waits for every fault to end; those still running after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [thread.name for thread in self.threads if thread.is_alive()]


def radar_serves(kit: ServedKit, log) -> list[int] | str:
    """RADAR's versions serving at the end; where the server does not say (it refused or dropped the question), why,
    which the verdict fails: the run ends with its report, not a traceback."""
    try:
        return Repository(kit.repository, kit.server.options.http_url, None, log).serving("radar")
    except (InferenceServerException, *GONE) as exc:
        return f"{type(exc).__name__}: {exc}"[:300]


def run(options: Options, log=print) -> dict:
    """The run's figures and its verdict's problems (none: it passed)."""
    shutil.rmtree(options.work / "versions", ignore_errors=True)  # what an earlier run deployed
    options.work.mkdir(parents=True, exist_ok=True)
    spec = user_spec(options.work / "models")
    kit = ServedKit(options.work / "kit", {spec.name: spec}).start()
    plan = schedule(options)
    try:
        cases = {
            "radar": answers.radar_cases(kit.repository, ARTIFACTS / "radar", 48, options.seed),
            "short": answers.radar_cases(kit.repository, ARTIFACTS / "radar", 32, options.seed + 1, chars=(100, 290)),
            "resnet50": answers.image_cases(kit.repository, ARTIFACTS / "resnet50", 12, options.seed + 2),
            "user": answers.rows_cases(spec, kit.repository, 24, options.seed + 3),
        }
        tally, watch = Tally(), Watch(kit).start()
        clients = ClosedLoop(kinds_of(cases, spec), kit.server.options.grpc_url, kit.door.url, tally)
        injections = Injections(Faults(kit, tally, cases, spec.door_route, options.work, log), log)
        log(f"chaos: {clients.size} clients for {options.seconds:.0f} s, {len(plan)} faults (seed {options.seed})")
        start = tally.start = time.monotonic()
        clients.start()
        for at, kind, seed in plan:
            time.sleep(max(0.0, start + at - time.monotonic()))
            injections.start(at, kind, seed)
        time.sleep(max(0.0, start + options.seconds - time.monotonic()))
        unfinished = injections.join(options.grace)
        clients.stop(options.grace)
        seconds = time.monotonic() - start
        ready = report.wait_ready(watch, READY_WAIT_S)
        why_not_ready = None if ready else watch.why_not_ready()
        serving = radar_serves(kit, log)
        stubs_at_end = kit.describe()
        watch.stop()
    finally:
        kit.stop()
    figures = {
        "seed": options.seed,
        "seconds": round(seconds, 1),
        "clients": {kind.name: kind.clients for kind in clients.kinds},
        "requests": tally.figures(),
        "faults": report.faults_figures(injections.done, watch, start),
        "unfinished_faults": unfinished,
        "supervisor": report.supervisor_figures(kit.events, start),
        "memory": watch.memory_figures(start + SETTLE_S),
        "ready_at_end": ready,
        "why_not_ready": why_not_ready,
        "stubs_at_end": stubs_at_end,
        "radar_serves": serving,
        "left_behind": kit.left_behind(),
        "supervisor_failure": kit.failure,
    }
    figures["problems"] = report.problems(figures)
    return figures
