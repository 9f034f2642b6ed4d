"""New versions of RADAR's export to deploy while the kit serves (kit.server.deploy), laid out as `make export`
writes one (DIR/radar/...): the same export linked again, a good version whose switch shows in Triton's index and the
door's canary and not in the scores; and a broken one, the graph the CPU profile serves with its AI logit shifted by
+1 (as a wrong classifier-head bias would shift it) beside the original golden set, which must fail its check and
roll back. The served tests of model updates and of the canary use them too."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from kit.control.configs import ARTIFACTS
from kit.control.repository import plan


def linked_export(root: Path, artifacts: Path = ARTIFACTS) -> Path:
    """`artifacts/radar`, linked file by file under root/radar: a new version of the same model."""
    (root / "radar").mkdir(parents=True)
    for path in (artifacts / "radar").iterdir():
        (root / "radar" / path.name).symlink_to(path.resolve())
    return root


def perturbed_export(root: Path, artifacts: Path = ARTIFACTS) -> Path:
    """`artifacts/radar` (linked) with the graph the CPU profile serves replaced by one whose AI logit is shifted by +1."""
    graph = plan("cpu", specs={})["radar_classifier"].written().parameters["onnx_model"].string_value
    source = artifacts / "radar"
    (root / "radar").mkdir(parents=True)
    for path in source.iterdir():
        if path.name != graph:
            (root / "radar" / path.name).symlink_to(path.resolve())
    model = onnx.load(source / graph)
    for node in model.graph.node:
        node.output[:] = ["unshifted" if name == "logits" else name for name in node.output]
    meta = json.loads((source / "export.json").read_text())
    shift = np.zeros(meta["num_labels"], np.float32)
    shift[meta["ai_label_index"]] = 1.0
    model.graph.initializer.append(numpy_helper.from_array(shift, "shift"))
    model.graph.node.append(helper.make_node("Add", ["unshifted", "shift"], ["logits"]))
    onnx.save(model, root / "radar" / graph)
    return root
