"""ResNet-50 on images of many shapes as a workload: Paddle Serving's dynamic-padding experiment on the
kit. Images of shape (3, 224±50, 224±50) from closed-loop clients (perf.engine.load: perf_analyzer
cannot send raw FP32 tensors of many shapes); the batching variants are `resnet50` profile overrides,
each on a fresh server, named by `label`:

    none     every request computed alone (merge policy `none`)
    triton   Triton's plain dynamic batching: no ragged batches, so equal shapes only
    paddle   Paddle Serving's merge rule
    cost     the kit's cost rule (the committed default)

Per point, from resnet50's padding counters and the backbone's statistics over the window: the
padding waste, images per backbone run, runs that mixed shapes and the backbone's busy share.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kit.control.configs import load_source_config, parameters
from perf.engine.inputs import InputSet
from perf.engine.tables import relative_table
from perf.engine.workload import Column, Workload

PADDING = 'padded_batch_elements{kind="padding",model="resnet50"}'
VALID = 'padded_batch_elements{kind="valid",model="resnet50"}'
MIXED = 'padded_batch_runs{model="resnet50",shapes="mixed"}'


def sample_images(count: int, seed: int, min_side: int, max_side: int) -> list[np.ndarray]:
    """Paddle's shapes: height and width each uniform in [min_side, max_side], normalised-range values."""
    rng = np.random.default_rng(seed)
    sides = rng.integers(min_side, max_side + 1, size=(count, 2))
    return [rng.standard_normal((1, 3, h, w), dtype=np.float32) for h, w in sides]


class Resnet(Workload):
    name, title = "resnet", "ResNet50"
    models = ("resnet50", "resnet50_backbone")
    entry, workers, artifacts = "resnet50", "resnet50_backbone", "resnet50"
    needs = ("model.onnx", "cost.json")
    request = item = "image"
    metric_prefixes = ("padded_batch_",)
    columns = (
        Column("padding waste", lambda r: f"{r['padding_waste']:.1%}"),
        Column("images / run", lambda r: f"{r['images_per_run']:.2f}"),
        Column("mixed runs", lambda r: str(r["mixed_runs"])),
        Column("backbone busy", lambda r: f"{r['backbone_busy']:.0%}"),
    )
    model_note = "ResNet-50 exported by export.resnet, its cost model (the `cost` rule's) measured by export.resnet_cost"
    load_note = (
        "one FP32 image [1, 3, H, W] per request over gRPC. The variants differ only in `resnet50`'s merge policy and "
        "ragged batches. Backbone busy: its compute time over the window, summed over its instances (above 100% with several)."
    )

    def label(self, models: dict) -> str:
        """The variant: Triton's own batching when ragged batches are off, else the merge policy."""
        resnet = models["resnet50"]
        if resnet.get("ragged_batch") is False:
            return "triton"
        return resnet.get("parameters", {}).get("merge_policy") or parameters(load_source_config("resnet50"))["merge_policy"]

    def setup(self, spec: dict, model_dir: Path, work: Path) -> tuple[dict[str, InputSet], None]:
        """The image tensors; no limit (the variants are compared with each other)."""
        images = lambda s: sample_images(s["count"], s["seed"], s["min_side"], s["max_side"])  # noqa: E731
        return {s["name"]: InputSet(s["name"], [{"INPUT": a} for a in images(s)], 1.0) for s in spec["inputs"]}, None

    def figures(self, row: dict) -> dict:
        m, backbone = row.get("metrics", {}), row.get("triton", {}).get("resnet50_backbone", {})
        padding, valid = m.get(PADDING, 0), m.get(VALID, 0)
        compute_ns = sum(backbone.get(k, 0) for k in ("compute_input", "compute_infer", "compute_output"))
        return {
            "padding_waste": padding / (padding + valid) if padding + valid else 0.0,
            "images_per_run": backbone["inferences"] / backbone["executions"] if backbone.get("executions") else 0.0,
            "mixed_runs": int(m.get(MIXED, 0)),
            "backbone_busy": compute_ns / 1e9 / row["wall_s"],
        }

    def inputs_line(self, spec: dict) -> str:
        return "; ".join(
            f"`{i['name']}`: {i['count']} FP32 images [1, 3, H, W], H and W each uniform in {i['min_side']}-{i['max_side']}, "
            f"standard normal values (seed {i['seed']})"
            for i in spec["inputs"]
        )

    def sections(self, results: dict, out_dir: Path) -> list[str]:
        rows = [r for r in results["sweeps"] if r["input"] == results["spec"]["sweep"]["input"]]
        layout = next(iter(results["kit_profiles"].values()))
        placement = ", ".join(f"{m} {json.dumps({k: v for k, v in s.items() if k != 'parameters'})}" for m, s in layout.items())
        return [
            "## Throughput relative to no batching\n",
            f"Same layout, same images; layout (CPU profile): {placement}.\n",
            *relative_table(rows, "none", self.key),
            "",
        ]

    def headline(self, results: dict) -> str:
        rows = [r for r in results["sweeps"] if r["input"] == results["spec"]["sweep"]["input"]]
        most = max(r["concurrency"] for r in rows)
        at = {r["setting"]: r[self.key] for r in rows if r["concurrency"] == most}
        if not at.get("none"):
            return f"no `none` point at {most} clients to compare with"
        return f"throughput relative to no batching at {most} clients: " + ", ".join(
            f"{setting} {rate / at['none']:.2f}x" for setting, rate in at.items() if setting != "none"
        )


RESNET = Resnet()
