"""What a workload tells the engine. perf/workloads/ holds one subclass per workload, registered once
in perf.workloads; everything the subclasses do not say (servers, load, sweep, report) is the engine's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.control.exports import export_dir
from kit.control.specs import ModelSpec
from kit.control.tasks import task_of
from perf.engine.inputs import InputSet


@dataclass(frozen=True)
class Baseline:
    """A hand-rolled service of perf/baselines, as its field report ran it."""

    server: str  # "flask" (Flask's own threaded server), "gunicorn" (gthread workers) or "uvicorn"
    app: str  # "module:app"
    title: str  # the report's name for it


# The hand-rolled designs a workload measures the kit against, by target family: each workload takes those it has.
HAND_ROLLED = {
    "flask": Baseline("flask", "perf.baselines.flask_app:app", "Flask"),
    "uvicorn": Baseline("uvicorn", "perf.baselines.fastapi_app:app", "FastAPI + uvicorn"),
    "batcher": Baseline("uvicorn", "perf.baselines.fastapi_batcher:app", "FastAPI + asyncio batcher"),
}


@dataclass(frozen=True)
class Deployment:
    """What a kit variant is built from: a profile of model_repository/profiles/ and, for the models that
    profile serves on the PyTorch runner, where they run (`placement`: device and dtype)."""

    profile: str = "cpu"
    placement: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, spec: dict) -> Deployment:
        return cls(spec.get("profile", "cpu"), tuple(sorted(spec.get("placement", {}).items())))

    @property
    def on_gpu(self) -> bool:
        """Whether some model may run on a GPU: its server then exports Triton's GPU metrics."""
        return self.profile != "cpu" and dict(self.placement).get("device", "cuda") == "cuda"


@dataclass(frozen=True)
class Verdict:
    """One of the issue's targets, judged from a run's numbers."""

    target: str
    met: bool
    detail: str


@dataclass(frozen=True)
class Column:
    """A workload's own column in the results table (e.g. ResNet's padding waste)."""

    header: str
    cell: Callable[[dict], str]


class Workload:
    name: str  # the spec's `workload`, the results folder perf/results/<name>/
    title: str  # "RADAR"
    models: tuple[str, ...]  # what a kit variant loads: its repository holds these only
    entry: str  # the model requests go to
    workers: str  # the model whose instance count is the kit's "workers / instances"
    artifacts: str  # the folder under artifacts/ that the spec's `model` folder stands in for
    needs: tuple[str, ...]  # files the spec's `model` folder must hold whatever serves it (the builder checks the rest)
    request: str  # what one request carries
    item: str  # what throughput is counted in (the limit too): rows' f"{item}s_per_s"
    baselines: dict[str, Baseline] = {}  # target family -> service
    endpoint: str = ""  # the baselines' POST path
    door_route: str = ""  # the front door's route for the entry model (a `door` target's POST path)
    deployment: Deployment = Deployment()  # what kit variants are built from: set per spec by `for_spec`
    metric_prefixes: tuple[str, ...] = ()  # Prometheus counters of the kit to difference over each point
    columns: tuple[Column, ...] = ()
    # The models whose Triton counters split the kit's time (perf.engine.tables.time_section), each as the names it has
    # had (the first a point's counters hold counts), and the report's words on what each does.
    timed: tuple[tuple[str, ...], ...] = ()
    time_note: str = ""
    model_note: str = ""  # the report's words on the model (a spec's `model_note` overrides it)
    load_note: str = ""  # on how requests reach each target
    workers_note: str = ""  # on what the memory table's worker count means for the kit
    goals: dict = {}  # the targets judged where a spec names none (perf.engine.verdicts)
    # Models from specs (kit.control.specs) that kit variants serve beside `models`; none for the shipped workloads,
    # whose variants so leave out whatever specs the project's models/ holds.
    specs: dict = {}

    def of_model(self, model: ModelSpec, roles: dict[str, str]) -> dict[str, str]:
        """This workload on the models a spec's task plans (`python -m perf sweep --model NAME`): named as the spec,
        its `entry`, and each of `roles` (attribute -> the task's name for the model, e.g. {"workers": "classifier"})
        set to that model's name; its export folder the report's; a user's spec built beside the shipped ones. The
        task's names, for what a workload adds."""
        names = task_of(model).names(model)
        self.spec, self.name, self.title, self.artifacts = model, model.name, model.name, model.name
        self.entry, self.folder, self.door_route = names["entry"], export_dir(model), model.door_route.removeprefix("/")
        for attribute, role in roles.items():
            setattr(self, attribute, names[role])
        self.models = (self.entry, *(names[role] for role in roles.values()))
        self.specs = {} if model.shipped else {model.name: model}  # a shipped spec's models are in every build
        self.model_note = f"{model.name} from {model.path.name} (task {model.task}: {model.source})"
        self.workers_note = f"The kit's count is `{self.workers}`'s instances."
        return names

    def for_spec(self, spec: dict) -> Workload:
        """This workload deployed as `spec` says (its `profile` and `placement`)."""
        bound = copy.copy(self)
        bound.deployment = Deployment.of(spec)
        return bound

    def by_role(self, setting: dict) -> dict:
        """`setting` with the models it names by role (`@entry`, `@workers`: no model's name can start with @) named
        as this workload's, so that one sweep spec fits the workload of any spec's model."""
        roles = {"@entry": self.entry, "@workers": self.workers}
        return {roles.get(model, model): settings for model, settings in setting.items()}

    @property
    def key(self) -> str:
        return f"{self.item}s_per_s"

    def family_title(self, family: str) -> str:
        titles = {"kit": "kit (Triton)", "door": "kit through the door", "control": "kit, control variant"}
        return titles.get(family) or self.baselines[family].title

    def label(self, models: dict) -> str:
        """A kit variant's layout in one line, from its profile's models."""
        raise NotImplementedError

    def variant_label(self, models: dict) -> str:
        """`label`, marked where a model of the variant has no queue policy of Triton's (kit.control.profiles)."""
        unqueued = any(settings.get("queue_policy") is False for settings in models.values())
        return self.label(models) + (" no-queue-policy" if unqueued else "")

    def setup(self, spec: dict, model_dir: Path, work: Path) -> dict[str, InputSet]:
        """The spec's input sets, each knowing its items per request."""
        raise NotImplementedError

    def limit(self, spec: dict, model_dir: Path, work: Path, inputs: dict[str, InputSet]) -> dict | None:
        """The spec's `limit`: the same work offline, in-process, at its best layout; None for a workload without one."""
        return None

    def accuracy(self, target, spec: dict, model_dir: Path, inputs: dict[str, InputSet]) -> dict:
        """The spec's `accuracy` check: the served target's answers against direct inference of the same model,
        {"requests", "max_abs_diff", "reference", ...}."""
        raise NotImplementedError(f"{self.name} has no accuracy check")

    def baseline_environment(self, family: str, setting: dict, model_dir: Path, work: Path) -> dict[str, str]:
        """What a baseline of `family` is configured with, beside ORT_THREADS (the engine's)."""
        return {}

    def figures(self, row: dict) -> dict:
        """The workload's own figures of a measured point, from its counters."""
        return {}

    def inputs_line(self, spec: dict) -> str:
        """The report's description of the spec's input sets."""
        raise NotImplementedError

    def sections(self, results: dict, out_dir: Path) -> list[str]:
        """The report's own sections, as Markdown lines, after the results and targets (the limit)."""
        return []

    def headline(self, results: dict) -> str:
        """One line for the index perf/RESULTS.md: the kit's best swept point, against the limit if there is one."""
        kit = [r for r in results["sweeps"] if r["family"] == "kit" and not r["error"]]
        if not kit:
            return "the kit has no successful point"
        best = max(kit, key=lambda r: r[self.key])
        line = f"kit {best[self.key]:.2f} {self.item}s/s at {best['load']} ({best['input']} {self.request}s)"
        if results.get("limit"):
            line += f", {best[self.key] / results['limit']['best'][self.key]:.2f} x the offline limit"
        return line
