"""The workloads the engine can measure, registered once: a spec's `workload` names one of these."""

from perf.engine.workload import Workload
from perf.workloads.ocr import OCR
from perf.workloads.pixels import RESNET
from perf.workloads.radar import RADAR

WORKLOADS: dict[str, Workload] = {w.name: w for w in (RADAR, OCR, RESNET)}
