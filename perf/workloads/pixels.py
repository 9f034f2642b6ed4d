"""An image classifier of pixels (an image-classification spec with `input = "pixels"`: ResNet-50's, or a user's
ResNet) on images of many shapes as a workload: Paddle Serving's dynamic-padding experiment on the kit. Images of
shape (3, 224±50, 224±50) from closed-loop clients (perf.engine.load); the batching variants are profile overrides of
the entry, each on a fresh server, named by `label`:

    none     every request computed alone (merge policy `none`)
    triton   Triton's plain dynamic batching: no ragged batches, so equal shapes only
    paddle   Paddle Serving's merge rule
    cost     the kit's cost rule (the default)

Per point, from the entry's padding counters and the backbone's statistics over the window: the padding waste,
images per backbone run, runs that mixed shapes and the backbone's busy share. `python -m perf sweep --model NAME`
runs a user's spec on perf/specs/model-pixels.json, whose variants name the entry by its role (`@entry`).
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.control.configs import SOURCE, parameters
from kit.control.specs import ModelSpec
from kit.control.tasks import shipped_specs
from kit.runners.onnx import make_session
from perf.baselines.pixels_model import PixelsModel, graph_inputs
from perf.engine.inputs import InputSet
from perf.engine.limit import CORES, by_cores, measured, repeated
from perf.engine.load import probabilities_check, served_answers
from perf.engine.tables import limit_section, relative_table
from perf.engine.targets import variant_models
from perf.engine.workload import Column, Workload
from perf.sim.device import SIM, SimulatedModel
from perf.workloads.tensor import SpecBaselines


def sample_images(count: int, seed: int, min_side: int, max_side: int) -> list[np.ndarray]:
    """Paddle's shapes: height and width each uniform in [min_side, max_side], normalised-range values."""
    rng = np.random.default_rng(seed)
    sides = rng.integers(min_side, max_side + 1, size=(count, 2))
    return [rng.standard_normal((1, 3, h, w), dtype=np.float32) for h, w in sides]


def image_set(spec_input: dict) -> InputSet:
    """A spec's images as the entry's `INPUT` tensors, as the baselines' JSON (shape, base64 of the values), and as the
    door's float32 bytes with their shape in the query (what its pixels route takes without decoding)."""
    s = spec_input
    images = sample_images(s["count"], s["seed"], s["min_side"], s["max_side"])
    values = [a[0].astype("<f4").tobytes() for a in images]
    shapes = [list(a.shape[1:]) for a in images]
    bodies = [json.dumps({"shape": shape, "data": base64.b64encode(v).decode()}).encode() for shape, v in zip(shapes, values)]
    raw = [(v, "shape=" + ",".join(map(str, shape))) for shape, v in zip(shapes, values)]
    tensors = [{"INPUT": a} for a in images]
    return InputSet(s["name"], tensors, 1.0, tensors=tensors, bodies=bodies, raw=raw)


def reference_probabilities(
    model_dir: Path, runner: dict[str, str], labels: int
) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
    """One [1, 3, H, W] image's class probabilities, unpadded, in FP32 (`runner`: the backbone's parameters): the
    checkpoint on the PyTorch runner on the CPU (torch is imported only there: the serve venv has none), a simulated
    device's own function, or the exported graph on ONNX Runtime."""
    if "sim_table" in runner:
        model = SimulatedModel(SIM / runner["sim_table"], runner["curve"], runner.get("precision", "fp16"), {"probs": labels})
        return f"the simulated device's function ({runner['sim_table']})", lambda image: model(graph_inputs(image))["probs"][0]
    if "torch_model" in runner:
        from kit.runners.torch import TorchModel, TorchOptions

        model = TorchModel.from_checkpoint(model_dir / "checkpoint", ["probs"], TorchOptions("fp32", "cpu"))
        return "the checkpoint in FP32 on the CPU (the PyTorch runner)", lambda image: model(graph_inputs(image))["probs"][0]
    session = make_session(model_dir / "model.onnx", CORES)
    return "model.onnx on ONNX Runtime", lambda image: session.run(["probs"], graph_inputs(image))[0][0]


class PixelsWorkload(SpecBaselines, Workload):
    """The workload of an image classifier of pixels, from its spec (a shipped one's export is `make export`'s); the
    hand-rolled designs serve the same graph, an image at a time or equal shapes together (perf.baselines.pixels_model)."""

    needs = ("cost.json",)
    endpoint = "predict"
    request = item = "image"
    sweep_spec = "model-pixels"  # perf/specs/model-pixels.json, for `--model NAME`
    metric_prefixes = ("padded_batch_",)
    columns = (
        Column("padding waste", lambda r: f"{r['padding_waste']:.1%}"),
        Column("images / run", lambda r: f"{r['images_per_run']:.2f}"),
        Column("mixed runs", lambda r: str(r["mixed_runs"])),
        Column("backbone busy", lambda r: f"{r['backbone_busy']:.0%}"),
    )

    def __init__(self, spec: ModelSpec, name: str = "", title: str = ""):
        self.of_model(spec, {"workers": "backbone"})
        self.name, self.title = name or spec.name, title or spec.name
        self.artifacts = spec.source if spec.shipped else spec.name
        self.padding = f'padded_batch_elements{{kind="padding",model="{self.entry}"}}'
        self.valid = f'padded_batch_elements{{kind="valid",model="{self.entry}"}}'
        self.mixed = f'padded_batch_runs{{model="{self.entry}",shapes="mixed"}}'
        self.model_note = (
            f"{spec.name} exported by export.resnet, its cost model (the `cost` rule's) measured by export.resnet_cost"
        )
        self.load_note = (
            "one FP32 image [1, 3, H, W] per request: its tensor over gRPC, its float32 bytes to the door "
            "(application/octet-stream, the shape in the query), base64 in JSON to the hand-rolled designs. "
            f"The variants differ only in `{self.entry}`'s merge policy "
            "and ragged batches. Backbone busy: its compute time over the window, summed over its instances (above 100% "
            "with several)."
        )

    def label(self, models: dict) -> str:
        """The variant: Triton's own batching when ragged batches are off, else the merge policy."""
        entry = models[self.entry]
        if entry.get("ragged_batch") is False:
            return "triton"
        return entry.get("parameters", {}).get("merge_policy") or self.spec.merge_policy

    def setup(self, spec: dict, model_dir: Path, work: Path) -> dict[str, InputSet]:
        """The image tensors, the baselines' JSON of each and the door's bytes."""
        return {s["name"]: image_set(s) for s in spec["inputs"]}

    def limit(self, spec: dict, model_dir: Path, work: Path, inputs: dict[str, InputSet]) -> dict | None:
        """Images/s of the graph in this process, each image alone at its own size (as the hand-rolled designs run
        it, perf.baselines.pixels_model), in both layouts (perf.engine.limit.by_cores; a spec with a `limit`: the
        merge-policy sweeps of resnet50 have none)."""
        lim = spec["limit"]
        images, passes = [item["INPUT"] for item in inputs[lim["input"]].tensors], lim.get("passes", 1)
        runs = [(layout, None, jobs) for layout, jobs in by_cores(functools.partial(limit_job, self.spec, passes), images)]
        return measured("image", runs, passes * len(images)) | {"passes": passes}

    def accuracy(self, target, spec: dict, model_dir: Path, inputs: dict[str, InputSet]) -> dict:
        """Class probabilities served for the first images of the sweep's input, each alone, against the same image
        alone and unpadded through the FP32 reference: the checkpoint on the PyTorch runner on the CPU where the kit
        serves that runner, else the ONNX graph."""
        images = inputs[spec["sweep"]["input"]].tensors[: spec["accuracy"].get("requests", 8)]
        backbone = variant_models(self, {}, model_dir, target.workdir / "accuracy")[self.workers].written()
        reference, probs = reference_probabilities(model_dir, parameters(backbone), backbone.output[0].dims[0])
        pairs = [
            (answer.as_numpy("PROBS").reshape(-1), probs(item["INPUT"]))
            for item, answer in zip(images, served_answers(target, self.entry, images))
        ]
        return probabilities_check(pairs) | {"reference": reference}

    def figures(self, row: dict) -> dict:
        m, backbone = row.get("metrics", {}), row.get("triton", {}).get(self.workers, {})
        padding, valid = m.get(self.padding, 0), m.get(self.valid, 0)
        compute_ns = sum(backbone.get(k, 0) for k in ("compute_input", "compute_infer", "compute_output"))
        return {
            "padding_waste": padding / (padding + valid) if padding + valid else 0.0,
            "images_per_run": backbone["inferences"] / backbone["executions"] if backbone.get("executions") else 0.0,
            "mixed_runs": int(m.get(self.mixed, 0)),
            "backbone_busy": compute_ns / 1e9 / row["wall_s"],
        }

    def inputs_line(self, spec: dict) -> str:
        return "; ".join(
            f"`{i['name']}`: {i['count']} FP32 images [1, 3, H, W], H and W each uniform in {i['min_side']}-{i['max_side']}, "
            f"standard normal values (seed {i['seed']})"
            for i in spec["inputs"]
        )

    def sections(self, results: dict, out_dir: Path) -> list[str]:
        lim, out = results.get("limit"), []
        if lim:
            note = (
                "The graph in this process on each image alone, at its own size (perf.baselines.pixels_model, as the "
                f"hand-rolled designs run it), the input set's images {lim['passes']} time(s).\n"
            )
            out = limit_section(lim, "image", note)
        if not results["kit_profiles"]:  # no kit target in the spec (the door alone): no layout to compare under
            return out
        rows = kit_rows(results)
        layout = next(iter(results["kit_profiles"].values()))
        placement = ", ".join(f"{m} {json.dumps({k: v for k, v in s.items() if k != 'parameters'})}" for m, s in layout.items())
        return [
            *out,
            "## Throughput relative to no batching\n",
            f"Same layout, same images; layout (the `{results['spec'].get('profile', 'cpu')}` profile): {placement}.\n",
            *relative_table(rows, "none", self.key),
            "",
        ]

    def headline(self, results: dict) -> str:
        rows = kit_rows(results)
        if not rows:
            return "no point measured"
        most = max(r["concurrency"] for r in rows)
        at = {r["setting"]: r[self.key] for r in rows if r["concurrency"] == most}
        if not at.get("none"):
            return f"no `none` point at {most} clients to compare with"
        return f"throughput relative to no batching at {most} clients: " + ", ".join(
            f"{setting} {rate / at['none']:.2f}x" for setting, rate in at.items() if setting != "none"
        )


def kit_rows(results: dict) -> list[dict]:
    """The kit's points on the sweep's input: its merge-policy variants, compared with each other."""
    return [r for r in results["sweeps"] if r["input"] == results["spec"]["sweep"]["input"] and r["family"] == "kit"]


RESNET = PixelsWorkload(shipped_specs(SOURCE)["resnet50"], "resnet", "ResNet50")


def limit_job(spec: ModelSpec, passes: int, images: list[np.ndarray], threads: int):
    """The limit's work in one process: `images` [1, 3, H, W] each run alone through the graph, `passes` times."""
    model = PixelsModel(spec, threads)
    return repeated(lambda image: model.run(graph_inputs(image)), images, passes)
