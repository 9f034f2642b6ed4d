"""A model from a user's spec (kit.control.specs) as a workload: `python -m perf sweep --model NAME` measures it the
way the shipped models are measured, with nothing written for it.

Requests carry `rows` rows of random inputs of the graph's own tensors (kit.control.configs.example_inputs: free
axes of 3, whole numbers 0-9 for integer inputs), the same rows for every design: the kit over gRPC, the kit through
the door's tensor route, and the hand-rolled designs on the same graph (perf/baselines/*_tensor*.py: Flask per
request, FastAPI + uvicorn per request, FastAPI with an asyncio batcher). The limit is the graph in this process, its
rows run in batches of each of the spec's sizes; the accuracy check compares served rows with the same rows run
alone in ONNX Runtime.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from kit.control.configs import example_inputs
from kit.control.specs import ModelSpec
from kit.control.tasks import entry_config
from kit.runners.onnx import make_session
from perf.baselines.tensor_model import TensorModel
from perf.engine.inputs import InputSet
from perf.engine.limit import CORES, measured, repeated
from perf.engine.load import max_diff, served_answers
from perf.engine.tables import limit_section
from perf.engine.workload import HAND_ROLLED, Workload

LIMIT_PASSES = 20


class SpecBaselines:
    """The hand-rolled designs on a spec's model (perf.baselines.spec_model loads it by its task), and what they are
    started with."""

    spec: ModelSpec
    baselines = HAND_ROLLED

    def baseline_environment(self, family: str, setting: dict, model_dir: Path, work: Path) -> dict[str, str]:
        env = {"MODEL_SPEC": str(self.spec.path.resolve())}
        if family == "batcher":
            env |= {"BATCH_SIZE_MAX": str(setting["batch_size_max"]), "BATCH_TIMEOUT": str(setting["batch_timeout_ms"] / 1000)}
        return env  # the limit runs the input set's rows this many times at each batch size


class TensorModelWorkload(SpecBaselines, Workload):
    """The workload of one spec's model."""

    request, item = "request", "row"
    sweep_spec = "model"  # perf/specs/model.json
    needs = ()
    endpoint = "predict"
    load_note = (
        "the kit over gRPC gets each request's rows as the graph's tensors; the door and the hand-rolled designs get the "
        'same rows as the door\'s JSON body, {"inputs": {tensor: nested arrays}}.'
    )

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.name = self.title = self.entry = self.workers = self.artifacts = spec.name
        self.models = (spec.name,)
        self.specs = {spec.name: spec}
        self.door_route = spec.door_route.removeprefix("/")
        self.model_note = f"{spec.name} from {spec.path.name} (task {spec.task}: {spec.source_path.name})"
        self.config = entry_config(spec)
        self.folder = spec.source_path.parent  # the report's model folder: the graph's

    def label(self, models: dict) -> str:
        settings = models[self.spec.name]
        return f"instances={settings.get('instances', self.spec.instances)}"

    def setup(self, spec: dict, model_dir: Path, work: Path) -> dict[str, InputSet]:
        sets = {}
        for s in spec["inputs"]:
            tensors = [example_inputs(self.config, s["rows"], s["seed"] + i) for i in range(s["count"])]
            bodies = [json.dumps({"inputs": {k: v.tolist() for k, v in t.items()}}).encode() for t in tensors]
            sets[s["name"]] = InputSet(s["name"], tensors, float(s["rows"]), tensors=tensors, bodies=bodies)
        return sets

    model, runs_in = TensorModel, "on ONNX Runtime"  # the accuracy check's reference, as the report names it
    limit_subject = "The graph"  # what the limit runs, as the report says it
    limit_batches = "in batches of each size"  # how, as the report says it

    def limit_layout(self) -> str:
        return f"ONNX Runtime, {CORES} threads"

    def limit_job(self, items: list[dict[str, np.ndarray]], batch: int):
        return functools.partial(limit_job, self.spec.source_path, items, batch)

    def limit(self, spec: dict, model_dir: Path, work: Path, inputs: dict[str, InputSet]) -> dict:
        """Rows/s (the workload's unit) of the model in this process (all cores) on the limit's input set, in batches
        of each size."""
        chosen = inputs[spec["limit"]["input"]]
        runs = [(self.limit_layout(), b, [self.limit_job(chosen.items, b)]) for b in spec["limit"]["batch_sizes"]]
        return measured(self.item, runs, LIMIT_PASSES * len(chosen.items) * chosen.per_request)

    def accuracy(self, target, spec: dict, model_dir: Path, inputs: dict[str, InputSet]) -> dict:
        """Served outputs of the first requests against each request's rows run alone in this process, as the
        hand-rolled designs run them (`model`); a string output must be equal, a number's difference is the figure."""
        items = inputs[spec["sweep"]["input"]].tensors[: spec["accuracy"].get("requests", 8)]
        model = self.model(self.spec, CORES)
        worst, unequal = 0.0, 0
        for arrays, result in zip(items, served_answers(target, self.entry, items)):
            for name, want in zip(model.outputs, model.run(arrays)):
                if want.dtype == np.object_:
                    unequal += int(result.as_numpy(name).reshape(want.shape).tolist() != want.tolist())
                else:
                    worst = max(worst, max_diff(result.as_numpy(name), want))
        worst = worst if not unequal else float("inf")  # a wrong string is no small difference
        return {"requests": len(items), "max_abs_diff": worst, "reference": f"{self.spec.source_path.name} {self.runs_in}"}

    def sections(self, results: dict, out_dir: Path) -> list[str]:
        lim = results.get("limit")
        if not lim:
            return []
        runs = f"the input set's {self.item}s run {LIMIT_PASSES} times {self.limit_batches}"
        return limit_section(lim, self.item, f"{self.limit_subject} alone in this process, {runs}.\n")

    def inputs_line(self, spec: dict) -> str:
        shapes = ", ".join(f"{t.name} {list(t.dims)}" for t in self.config.input)
        return "; ".join(
            f"`{s['name']}`: {s['count']} requests of {s['rows']} row(s) each, random ({shapes} without the batch axis, "
            f"free axes of 3; seed {s['seed']})"
            for s in spec["inputs"]
        )


def limit_job(graph: Path, items: list[dict[str, np.ndarray]], batch: int):
    """The limit's work: every item's rows, LIMIT_PASSES times, in batches of `batch` rows (their shapes are alike)."""
    session = make_session(graph, CORES)
    names = [o.name for o in session.get_outputs()]
    rows = {k: np.concatenate([item[k] for item in items]) for k in items[0]}
    count = len(next(iter(rows.values())))
    run = lambda start: session.run(names, {k: v[start : start + batch] for k, v in rows.items()})  # noqa: E731
    return repeated(run, range(0, count, batch), LIMIT_PASSES)
