"""Load a new version of a text model into a running server, check it, and only then retire the old one.

    python -m kit.server.deploy NAME --version 2 --artifacts DIR [--repository build/repository/cpu]
                                 [--url 127.0.0.1:8000] [--profile cpu]

NAME is a text model's entry whose config carries its export's golden set (`canary_from`; `radar` in the shipped
repository). DIR holds a new export as `make export` lays one out (DIR/NAME/model.onnx, tokenizer.json,
export.json with its golden set, ...). A version of NAME is its three models under one number (TextModels, read
from the entry's config): the entry ensemble N runs its texts model N (its step is pinned,
kit.control.repository.pin_steps), which calls its classifier N (kit/adapters/text_classifier_model.py), so the
graph, the tokenizer and the golden set of one export always serve together. The steps, each waited for:

1. version folder N of the three models is written beside the serving one, from DIR (kit.control.repository);
2. the classifier and the texts model are loaded with versions [old, N]: the old entry still runs the old ones;
3. the new export's golden set is run through the kit's own pipeline (its tokenizer) and the classifier
   N, then through the texts model N (no client reaches either yet); a score beyond the golden set's tolerance
   rolls back: both at [old], folders N removed;
4. the entry is loaded at version N, its step on the texts model N, with its new config (golden set, buckets):
   Triton serves the old entry until the new one is ready, then lets the old one finish what it holds;
5. the golden set through the entry itself, as the door's canary runs it; beyond the tolerance rolls back
   the three models to [old];
6. once the old entry is gone (not only no longer taking requests: it still sends what it holds to the old
   texts model), the texts model [N] retires the old version; once that is gone (its texts in flight answered
   by the old classifier), the classifier [N] does.

Every config is written to disk before it is loaded, so that the three config.pbtxt files always name what
serves (a restart of the server, the supervisor's, serves it) and loading the ensemble finds no step whose
config on disk differs from the one it runs (docs/RELIABILITY.md: what failed without it). A server that goes
away during the steps (a stub died, and the supervisor restarts it) is waited for, and the update rolled back.

The load and index calls are Triton's model-repository API, an admin API: give the admin key
($TRITON_ADMIN_KEY) where the server has one. Exit 0: N serves; 1: rolled back, the old version serves;
2: nothing was changed (bad arguments, no such export).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import tritonclient.http as httpclient
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from kit.adapters.artifacts import text_pipeline
from kit.adapters.settings import TextSettings
from kit.control.canary import GoldenSet, Report, compare, golden_from_parameter
from kit.control.configs import REPO_ROOT, RepositoryError, copy_config, parameters, parse_config, render_config
from kit.control.repository import pin_steps, plan, write_version
from kit.server.runtime import ADMIN_HEADER

ADMIN_KEY_ENV = "TRITON_ADMIN_KEY"
UNLOAD_TIMEOUT = 120.0  # seconds for an old version to finish what it holds (an entry drains for up to 60 s)
RESTART_TIMEOUT = 300.0  # seconds for a server that went away mid-deploy (a supervisor's restart) to be ready again
GONE = (OSError, http.client.HTTPException)  # a refused or reset connection, or one closed mid-answer
ROLLBACK_ATTEMPTS = 3
T = TypeVar("T")


class DeployError(RuntimeError):
    """The new version cannot be deployed; the message says why."""


@dataclass
class Outcome:
    version: int
    previous: int
    deployed: bool
    report: Report | None  # the last golden check's
    seconds: float  # from the first load to the last step
    step: str  # what was done last, or what failed


def pinned(config: mc.ModelConfig, versions: list[int]) -> mc.ModelConfig:
    """`config` serving exactly `versions`."""
    copy = copy_config(config)
    copy.version_policy.Clear()
    copy.version_policy.specific.versions.extend(sorted(versions))
    return copy


class Repository:
    """The served repository on disk and the server's model-repository API over HTTP."""

    def __init__(self, folder: Path, url: str, admin_key: str | None, log: Callable[[str], None]):
        self.folder, self.log = folder, log
        self.client = httpclient.InferenceServerClient(url, network_timeout=600.0, connection_timeout=600.0)
        self.headers = {ADMIN_HEADER: admin_key} if admin_key else None

    def config_on_disk(self, model: str) -> mc.ModelConfig:
        return parse_config((self.folder / model / "config.pbtxt").read_text())

    def states(self, model: str) -> list[tuple[int, str | None]]:
        """Each version of `model` in the repository index, with its state (READY, UNLOADING, ...)."""
        index = self.client.get_model_repository_index(headers=self.headers)
        return [(int(m["version"]), m.get("state")) for m in index if m["name"] == model and m.get("version")]

    def serving(self, model: str) -> list[int]:
        return sorted(version for version, state in self.states(model) if state == "READY")

    def unloaded(self, model: str, version: int, timeout: float = UNLOAD_TIMEOUT) -> None:
        """Waits until `version` of `model` is gone, not only no longer taking requests: an ensemble's old version
        still sends the requests it holds to its steps' old versions, and an entry that hands its work off still
        calls the old classifier until its finalize has drained (kit.adapters.handoff), so a step's old version is
        unloaded only after what calls it is."""
        deadline = time.monotonic() + timeout
        while True:
            if not any(v == version and state in ("READY", "UNLOADING") for v, state in self.states(model)):
                return
            if time.monotonic() > deadline:
                raise DeployError(f"{model} {version} was still unloading after {timeout:.0f} s")
            time.sleep(0.2)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Waits until the server answers ready (RESTART_TIMEOUT at most): after a restart it serves the configs on
        disk."""
        timeout = RESTART_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.client.is_server_ready(headers=self.headers):
                    return
            except (InferenceServerException, *GONE):
                pass
            if time.monotonic() > deadline:
                raise DeployError(f"Triton was not ready within {timeout:.0f} s; it serves the configs on disk")
            time.sleep(0.5)

    def load(self, config: mc.ModelConfig) -> None:
        """Loads `config`, written to disk first, so that what serves and what is on disk never differ: while they
        did, loading the ensemble left the old ensemble's step briefly not ready (docs/RELIABILITY.md)."""
        versions = list(config.version_policy.specific.versions)
        self.log(f"loading {config.name} {versions}")
        self.persist(config)
        self.client.load_model(config.name, headers=self.headers, config=json_format.MessageToJson(config))

    def persist(self, config: mc.ModelConfig) -> None:
        (self.folder / config.name / "config.pbtxt").write_text(render_config(config))

    def close(self) -> None:
        self.client.close()


@dataclass(frozen=True)
class TextModels:
    """A text model's three models, one version of which serves together."""

    entry: str
    texts: str
    classifier: str

    @classmethod
    def of(cls, repo: Repository, entry: str) -> TextModels:
        """The models behind `entry` as its config on disk names them: its ensemble's step, its texts' classifier."""
        try:
            config = repo.config_on_disk(entry)
        except FileNotFoundError:
            raise DeployError(f"{repo.folder} has no model {entry!r}") from None
        params = parameters(config)
        if "canary_from" not in params or len(config.ensemble_scheduling.step) != 1:
            raise DeployError(f"{entry} is not a text model's entry with a golden set (`canary_from`): nothing checks it")
        return cls(entry, config.ensemble_scheduling.step[0].model_name, params["classifier"])

    @property
    def all(self) -> tuple[str, str, str]:
        return self.entry, self.texts, self.classifier


def classifier_scores(
    repo: Repository, models: TextModels, version: int, settings: TextSettings, export: Path, texts
) -> list[float]:
    """Each text's score through the classifier `version` alone, tokenised and aggregated by the kit's text
    pipeline from the new export: the check of a graph no request can reach yet."""
    pipeline = text_pipeline(export, settings)
    scores = []
    for text in texts:
        plan = pipeline.plan(text)
        logits = []
        for group in plan.groups:
            inputs = []
            for name in ("input_ids", "attention_mask"):
                array = getattr(group, name).astype(np.int64)
                tensor = httpclient.InferInput(name, list(array.shape), "INT64")
                tensor.set_data_from_numpy(array)
                inputs.append(tensor)
            result = repo.client.infer(models.classifier, inputs, model_version=str(version))
            logits.append(result.as_numpy("logits"))
        scores.append(pipeline.finish(plan, logits).score)
    return scores


def entry_scores(repo: Repository, texts, model: str, version: int | None = None) -> list[float]:
    """Each text's SCORE through the entry `model` as any client calls it (no version named), or through `model`
    `version` (a texts model N, which takes a batch of texts: [1, 1])."""
    scores = []
    for text in texts:
        shape = [1] if version is None else [1, 1]
        tensor = httpclient.InferInput("TEXT", shape, "BYTES")
        tensor.set_data_from_numpy(np.array([text.encode("utf-8")], dtype=np.object_).reshape(shape))
        result = repo.client.infer(model, [tensor], model_version="" if version is None else str(version))
        scores.append(float(result.as_numpy("SCORE").reshape(-1)[0]))
    return scores


def once_ready(repo: Repository, step: Callable[[], T], failed: str, again: Callable[[Exception], None]) -> T:
    """`step` once the server is ready, and again once it is ready after a restart cut it short (ROLLBACK_ATTEMPTS
    tries): a deploy started while a supervisor restarts the server, and a roll-back, wait for it rather than fail on
    the refused connection."""
    for attempt in range(ROLLBACK_ATTEMPTS):
        repo.wait_ready()
        try:
            return step()
        except (InferenceServerException, *GONE) as exc:  # gone again between ready and the step
            if attempt == ROLLBACK_ATTEMPTS - 1:
                raise DeployError(f"{failed}: {exc}") from None
            again(exc)


def deploy(
    repo: Repository, name: str, version: int, artifacts: Path, profile: str = "cpu", log: Callable[[str], None] = print
) -> Outcome:
    """Version `version` of the text model `name` from the export in `artifacts`, checked before the old one retires."""
    models = TextModels.of(repo, name)
    entry, texts, classifier = every = models.all
    old = {model: repo.config_on_disk(model) for model in every}
    serving = once_ready(
        repo, lambda: repo.serving(entry), f"Triton did not say which versions of {entry} serve", lambda exc: None
    )
    if len(serving) != 1:
        raise DeployError(f"{entry} serves versions {serving}; deploy needs exactly one")
    previous = serving[0]
    if version <= previous:
        raise DeployError(f"version {version} is not newer than the serving {previous}")
    try:
        planned = plan(profile, artifacts=artifacts, models=every)
    except RepositoryError as exc:
        raise DeployError(str(exc)) from None
    configs = {model: planned[model].written() for model in every}
    pin_steps(configs[entry], version, configs)
    settings = planned[entry].settings
    if not settings.canary:
        raise DeployError(f"{artifacts / entry / 'export.json'} has no golden set: an unchecked version is not deployed")
    golden: GoldenSet = golden_from_parameter(settings.canary)
    folders = [repo.folder / model / str(version) for model in every]
    for folder in folders:
        if folder.exists():
            raise DeployError(f"{folder} exists already")

    start = time.monotonic()
    for model in every:
        write_version(repo.folder / model, version, planned[model])

    def step_down() -> None:
        """Every model back to [previous]; as the steps went up, where a restart made the new entry serve already
        (it serves the configs on disk)."""
        if version in repo.serving(entry):
            for model in (classifier, texts):
                repo.load(pinned(old[model], [previous, version]))
            repo.load(pinned(old[entry], [previous]))
            repo.unloaded(entry, version)
            repo.load(pinned(old[texts], [previous]))
            repo.unloaded(texts, version)
            repo.load(pinned(old[classifier], [previous]))
        else:
            for model in every:
                repo.load(pinned(old[model], [previous]))

    def roll_back(step: str, report: Report | None) -> Outcome:
        log(f"rolling back: {step}")
        once_ready(
            repo,
            step_down,  # a restart under the roll-back: again once it is ready
            f"the roll-back of {entry} {version} failed",
            lambda exc: log(f"rolling back again once Triton is ready ({exc})"),
        )
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        return Outcome(version, previous, False, report, time.monotonic() - start, step)

    def check(model: str, scores: list[float]) -> Report:
        report = compare(golden, scores)
        log(f"{model} {version}: max drift {report.max_drift:.3g} (tolerance {report.tolerance:.3g})")
        return report

    try:
        repo.load(pinned(configs[classifier], [previous, version]))
        export = repo.folder / texts / str(version)
        report = check(classifier, classifier_scores(repo, models, version, settings, export, golden.texts))
        if not report.ok:
            return roll_back(f"{classifier} {version} fails its golden set", report)
        repo.load(pinned(configs[texts], [previous, version]))
        report = check(texts, entry_scores(repo, golden.texts, texts, version))
        if not report.ok:
            return roll_back(f"{texts} {version} fails its golden set", report)
        repo.load(pinned(configs[entry], [version]))
        report = check(entry, entry_scores(repo, golden.texts, entry))
        if not report.ok or repo.serving(entry) != [version]:
            return roll_back(f"{entry} {version} fails its golden set", report)
        repo.unloaded(entry, previous)
        for model in (texts, classifier):
            repo.load(pinned(configs[model], [version]))
            repo.unloaded(model, previous)
    except InferenceServerException as exc:
        return roll_back(f"Triton: {exc.message() or exc}", None)
    except GONE as exc:  # the server went away mid-step: a supervisor restarts it, serving the configs on disk
        log(f"Triton went away ({exc}); waiting for it to be ready again")
        repo.wait_ready()
        return roll_back(f"Triton went away during the deploy ({exc})", None)
    return Outcome(version, previous, True, report, time.monotonic() - start, f"{entry} {version} serves")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="the text model to update: the entry of a text spec, whose config carries its golden set")
    parser.add_argument("--version", type=int, required=True, help="the new version's number, above the serving one")
    parser.add_argument("--artifacts", type=Path, required=True, help="the folder holding the new export (DIR/NAME/...)")
    parser.add_argument("--repository", type=Path, default=REPO_ROOT / "build" / "repository" / "cpu")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--url", default="127.0.0.1:8000", help="Triton's HTTP address")
    args = parser.parse_args(argv)
    repo = Repository(args.repository, args.url, os.environ.get(ADMIN_KEY_ENV), print)
    try:
        outcome = deploy(repo, args.model, args.version, args.artifacts, args.profile)
    except DeployError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        repo.close()
    print(json.dumps(outcome.__dict__ | {"report": outcome.report and outcome.report.max_drift}))
    return 0 if outcome.deployed else 1


if __name__ == "__main__":
    sys.exit(main())
