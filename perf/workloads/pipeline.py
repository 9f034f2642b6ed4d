"""A `pipeline` spec's model (kit.control.pipeline_task) as a workload: `python -m perf sweep --model NAME` measures a
user's own module the way the `onnx` task's graphs are measured (perf.workloads.tensor), with nothing written for it.

Requests carry `rows` rows: drawn from the module's EXAMPLE where it declares one (random rows may not be valid
input to it), else random rows of its INPUTS. The same rows go to every design: the kit over gRPC, the kit through
the door's tensor route, and the hand-rolled designs running the same module with its networks in their own process
(perf.baselines.pipeline_model). The limit is the module in this process over ONNX Runtime, its rows run in batches
of each of the spec's sizes; the accuracy check compares served rows with the same rows run in that process.

An unbatched pipeline's (max_batch_size 0) request is one of its EXAMPLE's items whole (or random tensors of its
INPUTS), counted in requests; its sweep (perf/specs/model-unbatched.json) has no batcher to compare, since its
requests have no rows to concatenate, and its limit runs that many requests at once.
"""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path

import numpy as np

from door.routes import json_values
from kit.adapters.custom_pipeline import in_process_networks
from kit.control.configs import example_inputs
from kit.control.specs import ModelSpec, read_specs
from kit.pipelines.custom import answer
from perf.baselines.pipeline_model import PipelineModel
from perf.baselines.planned import entry_pipeline
from perf.engine.inputs import InputSet
from perf.engine.limit import CORES
from perf.workloads.tensor import LIMIT_PASSES, TensorModelWorkload

UNBATCHED_LOAD_NOTE = (
    "the kit over gRPC gets each request's tensors whole as the module's INPUTS; the door and the hand-rolled designs "
    'get the same tensors as the door\'s JSON body, {"inputs": {tensor: nested arrays}}, and run the same module and '
    "graphs."
)


class PipelineModelWorkload(TensorModelWorkload):
    load_note = (
        "the kit over gRPC gets each request's rows as the module's INPUTS; the door and the hand-rolled designs get the "
        'same rows as the door\'s JSON body, {"inputs": {tensor: nested arrays}}, and run the same module and graphs.'
    )

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        # The specs beside it: a build of its entry alone plans those that bring the models its networks are mapped to.
        self.specs = {} if spec.shipped else read_specs(spec.path.parent)
        self.pipeline = entry_pipeline(spec)
        self.batched = spec.max_batch_size > 0
        if not self.batched:
            self.item, self.sweep_spec = "request", "model-unbatched"
            self.limit_batches = "with each count of requests run at once"
            self.load_note = UNBATCHED_LOAD_NOTE
        self.model_note = (
            f"{spec.name} from {spec.path.name} (task pipeline: {spec.source_path.name}, networks "
            + (", ".join(f"{name} {graph}" for name, graph in self.pipeline.networks.items()) or "none")
            + ")"
        )

    def rows(self, count: int, seed: int) -> dict[str, np.ndarray]:
        """A request's tensors: `count` rows, or, unbatched, one item whole (its EXAMPLE's, else random)."""
        example = self.pipeline.example
        if example is None:
            return example_inputs(self.config, count, seed)
        rng = np.random.default_rng(seed)
        picked = rng.integers(0, len(next(iter(example.values()))), count if self.batched else None)
        return {name: values[picked] for name, values in example.items()}

    def setup(self, spec: dict, model_dir: Path, work: Path) -> dict[str, InputSet]:
        sets = {}
        for s in spec["inputs"]:
            tensors = [self.rows(s["rows"], s["seed"] + i) for i in range(s["count"])]
            bodies = [json.dumps({"inputs": {k: json_values(v) for k, v in t.items()}}).encode() for t in tensors]
            per_request = float(s["rows"] if self.batched else 1)
            sets[s["name"]] = InputSet(s["name"], tensors, per_request, tensors=tensors, bodies=bodies)
        return sets

    model, runs_in = PipelineModel, "in-process"
    limit_subject = "The module"

    def limit_layout(self) -> str:
        return f"the module, ONNX Runtime {CORES} threads"

    def limit_job(self, items: list[dict[str, np.ndarray]], batch: int):
        return functools.partial(limit_job, self.spec, items, batch)

    def inputs_line(self, spec: dict) -> str:
        source = "drawn from the module's EXAMPLE" if self.pipeline.example is not None else "random"
        each = (lambda s: f"{s['rows']} row(s) each") if self.batched else (lambda s: "one item whole each")
        return "; ".join(
            f"`{s['name']}`: {s['count']} requests of {each(s)}, {source} (seed {s['seed']})" for s in spec["inputs"]
        )


def limit_job(spec: ModelSpec, items: list[dict[str, np.ndarray]], batch: int):
    """The limit's work: every item's rows, LIMIT_PASSES times, through the module in batches of `batch` rows; of an
    unbatched module, its requests `batch` at a time, each whole."""
    pipeline = entry_pipeline(spec)
    networks = in_process_networks(pipeline, spec.source_path.parent, spec.max_batch_size, CORES)
    if spec.max_batch_size == 0:
        groups = [items[start : start + batch] for start in range(0, len(items), batch)]
        steps = [lambda g=g: asyncio.gather(*(answer(pipeline, item, networks, rows=False) for item in g)) for g in groups]
    else:
        rows = {k: np.concatenate([item[k] for item in items]) for k in items[0]}
        starts = range(0, len(next(iter(rows.values()))), batch)
        steps = [lambda s=s: answer(pipeline, {k: v[s : s + batch] for k, v in rows.items()}, networks) for s in starts]

    async def passes(times: int) -> None:
        for _ in range(times):
            for step in steps:
                await step()

    asyncio.run(passes(1))  # warm-up, outside the time
    return lambda: asyncio.run(passes(LIMIT_PASSES))
