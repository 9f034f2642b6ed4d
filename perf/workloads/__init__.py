"""The workloads the engine can measure, registered once: a spec's `workload` names one of these."""

from perf.engine.workload import Workload
from perf.workloads.ocr import OCR
from perf.workloads.pixels import RESNET
from perf.workloads.radar import RADAR
from perf.workloads.radar_precision import RADAR_PRECISION

WORKLOADS: dict[str, Workload] = {w.name: w for w in (RADAR, RADAR_PRECISION, OCR, RESNET)}
