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

import base64
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

from kit.control.configs import SOURCE, parameters
from kit.control.tasks import canonical_config
from kit.runners.onnx import make_session
from kit.runners.simulated import SimulatedModel
from perf.engine.inputs import InputSet
from perf.engine.limit import CORES
from perf.engine.load import tensor
from perf.engine.tables import relative_table
from perf.engine.targets import variant_configs
from perf.engine.workload import Column, Workload

PADDING = 'padded_batch_elements{kind="padding",model="resnet50"}'
VALID = 'padded_batch_elements{kind="valid",model="resnet50"}'
MIXED = 'padded_batch_runs{model="resnet50",shapes="mixed"}'
# One request of the accuracy check: a hung server fails the check, not the run.
ACCURACY_TIMEOUT_S = 60.0


def sample_images(count: int, seed: int, min_side: int, max_side: int) -> list[np.ndarray]:
    """Paddle's shapes: height and width each uniform in [min_side, max_side], normalised-range values."""
    rng = np.random.default_rng(seed)
    sides = rng.integers(min_side, max_side + 1, size=(count, 2))
    return [rng.standard_normal((1, 3, h, w), dtype=np.float32) for h, w in sides]


def image_set(spec_input: dict) -> InputSet:
    """A spec's images as the `INPUT` tensors of `resnet50`, and as the door's JSON (shape, base64 of the values)."""
    s = spec_input
    images = sample_images(s["count"], s["seed"], s["min_side"], s["max_side"])
    bodies = [
        json.dumps({"shape": list(a.shape[1:]), "data": base64.b64encode(a[0].astype("<f4").tobytes()).decode()}).encode()
        for a in images
    ]
    tensors = [{"INPUT": a} for a in images]
    return InputSet(s["name"], tensors, 1.0, tensors=tensors, bodies=bodies)


def reference_probabilities(model_dir: Path, runner: dict[str, str]) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
    """One [1, 3, H, W] image's class probabilities, unpadded, in FP32 (`runner`: the backbone's parameters): the
    checkpoint on the PyTorch runner on the CPU (torch is imported only there: the serve venv has none), a simulated
    device's own function, or the exported graph on ONNX Runtime."""
    feed = lambda image: {"pixel_values": image, "image_sizes": np.array([image.shape[2:]], dtype=np.int64)}  # noqa: E731
    if "sim_table" in runner:
        model = SimulatedModel(SOURCE / "devices" / runner["sim_table"], runner["curve"], runner["precision"], {"probs": 1000})
        return f"the simulated device's function ({runner['sim_table']})", lambda image: model(feed(image))["probs"][0]
    if "torch_model" in runner:
        from kit.runners.torch import TorchModel, TorchOptions

        model = TorchModel.from_checkpoint(model_dir / "checkpoint", ["probs"], TorchOptions("fp32", "cpu"))
        return "the checkpoint in FP32 on the CPU (the PyTorch runner)", lambda image: model(feed(image))["probs"][0]
    session = make_session(model_dir / "model.onnx", CORES)
    return "model.onnx on ONNX Runtime", lambda image: session.run(["probs"], feed(image))[0][0]


class Resnet(Workload):
    name, title = "resnet", "ResNet50"
    models = ("resnet50", "resnet50_backbone")
    entry, workers, artifacts = "resnet50", "resnet50_backbone", "resnet50"
    needs = ("cost.json",)
    request = item = "image"
    door_route = "v1/resnet50"
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
        return resnet.get("parameters", {}).get("merge_policy") or parameters(canonical_config("resnet50"))["merge_policy"]

    def setup(self, spec: dict, model_dir: Path, work: Path) -> dict[str, InputSet]:
        """The image tensors, and the door's JSON of each; no limit (the variants are compared with each other)."""
        return {s["name"]: image_set(s) for s in spec["inputs"]}

    def accuracy(self, target, spec: dict, model_dir: Path, inputs: dict[str, InputSet]) -> dict:
        """Class probabilities served for the first images of the sweep's input, each alone, against the same image
        alone and unpadded through the FP32 reference: the checkpoint on the PyTorch runner on the CPU where the kit
        serves that runner, else the ONNX graph."""
        images = inputs[spec["sweep"]["input"]].tensors[: spec["accuracy"].get("requests", 8)]
        clf = parameters(variant_configs(self, {}, model_dir, target.workdir / "accuracy")["resnet50_backbone"])
        reference, probs = reference_probabilities(model_dir, clf)
        client = grpcclient.InferenceServerClient(target.grpc_url)
        diffs, agree = [], 0
        try:
            for item in images:
                image = item["INPUT"]
                request = [tensor("INPUT", image)]
                served = client.infer(self.entry, request, client_timeout=ACCURACY_TIMEOUT_S).as_numpy("PROBS").reshape(-1)
                expected = probs(image)
                diffs.append(float(np.abs(served - expected).max()))
                agree += int(served.argmax() == expected.argmax())
        finally:
            client.close()
        return {
            "requests": len(images),
            "max_abs_diff": max(diffs),
            "top1_agreement": agree / len(images),
            "reference": reference,
        }

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
            f"Same layout, same images; layout (the `{results['spec'].get('profile', 'cpu')}` profile): {placement}.\n",
            *relative_table(rows, "none", self.key),
            "",
        ]

    def headline(self, results: dict) -> str:
        rows = [r for r in results["sweeps"] if r["input"] == results["spec"]["sweep"]["input"]]
        if not rows:
            return "no point measured"
        most = max(r["concurrency"] for r in rows)
        at = {r["setting"]: r[self.key] for r in rows if r["concurrency"] == most}
        if not at.get("none"):
            return f"no `none` point at {most} clients to compare with"
        return f"throughput relative to no batching at {most} clients: " + ", ".join(
            f"{setting} {rate / at['none']:.2f}x" for setting, rate in at.items() if setting != "none"
        )


RESNET = Resnet()
