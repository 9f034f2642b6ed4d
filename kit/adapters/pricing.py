"""Run costs from a device table, for the models that plan merged runs by cost (the runners' `merge`, ResNet's
`cost` policy): the table's measured wall times per batch (kit.runners.simulated's tables) fitted into
kit.pipelines.batching.merge's CostModel."""

from __future__ import annotations

from pathlib import Path

from kit.adapters.settings import PricedSettings
from kit.pipelines.batching.merge import CostModel
from kit.runners.simulated import Curve


def priced_cost_model(settings: PricedSettings, version_dir: Path) -> CostModel | None:
    """The cost model of the settings' device table curve (seconds per batch, by batch size and work per item:
    tokens or pixels); None where they name no table."""
    if not settings.merge_table:
        return None
    curve = Curve.from_file(version_dir / settings.merge_table, settings.merge_curve, settings.merge_precision)
    return CostModel.fit(curve.samples())
