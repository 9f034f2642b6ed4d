"""A run's requests, in every form a load generator sends them.

`items` are the workload's own (texts, encoded images, tensors), what its limit computes on. The same
requests go to Triton as `tensors` (by input name, for the closed loop's gRPC client) and to the door
and the baselines as JSON `bodies`; where the door's route also takes the bytes themselves (a pixels route), the
door gets those (`raw`), as a client holding the array would send them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np


@dataclass
class InputSet:
    name: str
    items: list  # one per request: texts, encoded images, or tensors by input name
    per_request: float  # what a request carries in the workload's unit: RADAR's chunks per text, one image
    tensors: list[dict[str, np.ndarray]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    raw: list[tuple[bytes, str]] = field(default_factory=list)  # the door's binary bodies, each with its query string


def bytes_tensor(name: str, value: str) -> dict[str, np.ndarray]:
    """One BYTES element, as Triton's entry models take a text or an encoded image."""
    return {name: np.array([value.encode("utf-8")], dtype=np.object_)}


def input_set(name: str, items: list, per_request: float, tensor: str, bodies: list[dict]) -> InputSet:
    """Requests whose Triton form is one BYTES element `tensor` holding each JSON body's only value (a text, a
    base64 image)."""
    values = [next(iter(body.values())) for body in bodies]
    return InputSet(
        name,
        items,
        per_request,
        tensors=[bytes_tensor(tensor, v) for v in values],
        bodies=[json.dumps(body).encode("utf-8") for body in bodies],
    )
