"""A text spec's model (text-classification or feature-extraction, docs/MODELS.md) as a workload: `python -m perf
sweep --model NAME` measures it as RADAR is measured, with nothing written for it.

It is RADAR's workload (perf.workloads.radar) on the spec's three models, `NAME`, `NAME_texts` and the graph's
(`NAME_classifier` or `NAME_encoder`), over the spec's export (artifacts/models/NAME): the same texts and chunking for
every design, the same length buckets, the same graph on the same runner for the kit, the door, the hand-rolled
services (which run RADAR's pipeline on the export: the work per chunk is the spec's model's), and the offline limit.
The accuracy check compares every label's served probabilities, or the served embeddings, with the pipeline run
in-process on the graph as exported.
"""

from __future__ import annotations

from kit.control.specs import ModelSpec
from kit.control.tasks import entry_config
from perf.workloads.radar import Radar


class TextModelWorkload(Radar):
    """The workload of one text spec's model."""

    sweep_spec = "model-text"  # perf/specs/model-text.json

    def __init__(self, spec: ModelSpec):
        self.of_model(spec, {"texts": "texts", "workers": "classifier"})

    @property
    def answers(self) -> tuple[str, str]:
        """The entry's outputs of a text and of its chunks: its first two, as its task writes them."""
        text, chunks = (output.name for output in entry_config(self.spec).output[:2])
        return text, chunks
