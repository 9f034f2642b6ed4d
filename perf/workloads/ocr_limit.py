"""OCR's limit: the kit's whole pipeline in this process, no server, at its best layout, in images/s.

The same encoded images through decoding, pre/post-processing and the det/cls/rec sessions
(perf.baselines.ocr_model: what the served `ocr` does), one image after another: one process whose
sessions use all cores, or N processes x 1 thread taking the next image from a shared counter (the
images differ in cost, so fixed shares would leave a process idle at the end). The best one is the
ceiling.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from perf.baselines.ocr_model import OcrModel
from perf.engine.limit import CORES, measured, shared_counter


def read_all(model: OcrModel, images: list[bytes], counter=None) -> None:
    """Every image in turn; with a shared counter, only the images no other process has taken."""
    if counter is None:
        for data in images:
            model.read(data)
        return
    while True:
        with counter.get_lock():
            index = counter.value
            counter.value += 1
        if index >= len(images):
            return
        model.read(images[index])


def ocr_job(model_dir: Path, images: list[bytes], warmup: list[bytes], threads: int, counter=None) -> Callable[[], None]:
    model = OcrModel(model_dir, threads)
    read_all(model, warmup)
    return functools.partial(read_all, model, images, counter)


def measure(model_dir: Path, images: list[bytes], warmup: int = 2) -> dict:
    """Images/s of both layouts on `images` (after `warmup` of them, uncounted), and the best."""
    first = images[:warmup]
    runs = [(f"1 process x {CORES} threads", None, [functools.partial(ocr_job, model_dir, images, first, CORES)])]
    if CORES > 1:
        shared = functools.partial(ocr_job, model_dir, images, first, 1, shared_counter())
        runs.append((f"{CORES} processes x 1 thread", None, [shared] * CORES))
    return {"images": len(images), **measured("image", runs, len(images))}
