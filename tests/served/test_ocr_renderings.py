"""Served `ocr` and `health_code` on pages rendered by headless chromium (samples.renderings): the
committed detector sizing reads them better than RapidOCR, the engine the pipeline started from,
and the health-code reader gets every rendered screen right. The benchmark over a larger corpus,
with every sizing policy, is perf/results/ocr/sizing.json (docs/OCR.md)."""

from __future__ import annotations

import pytest
from rapidocr_onnxruntime import RapidOCR

from clients.health_code import HealthCodeClient
from clients.ocr import OcrClient
from samples.renderings import corpus
from samples.scoring import character_accuracy
from tests.ocr_cases import read_all

# Measured on this corpus (seed 3, 9 pages): 0.9894 served (0.9959 spaces aside) against 0.9358
# (0.9938) for RapidOCR's default.
ACCURACY_FLOOR = 0.97


@pytest.fixture(scope="module")
def pages():
    return corpus(1, seed=3)


@pytest.fixture(scope="module")
def served(server, pages):
    return [[line.text for line in lines] for lines in read_all(OcrClient, server.options.grpc_url, [p.data for p in pages])]


def test_rendered_pages_are_read_better_than_by_rapidocr(pages, served):
    engine = RapidOCR()
    reference = [[line[1] for line in engine(page.data)[0] or []] for page in pages]
    truth = [page.lines for page in pages]
    ours, theirs = character_accuracy(served, truth), character_accuracy(reference, truth)
    ours_packed, theirs_packed = (character_accuracy(r, truth, spaces=False) for r in (served, reference))
    print(
        f"\ncharacter accuracy over {len(pages)} rendered pages: served {ours:.4f} (spaces aside {ours_packed:.4f}), "
        f"RapidOCR's default {theirs:.4f} ({theirs_packed:.4f})"
    )
    assert ours >= ACCURACY_FLOOR
    assert ours > theirs and ours_packed >= theirs_packed - 0.01


def test_every_rendered_health_code_screen_is_read_right(server, pages):
    screens = [page for page in pages if page.code]
    assert {page.code["color"] for page in screens} == {"green", "yellow", "red"}
    answers = read_all(HealthCodeClient, server.options.grpc_url, [page.data for page in screens])
    for page, answer in zip(screens, answers, strict=True):
        want = page.code
        assert (answer["color"], answer["qr"]) == (want["color"], want["qr"]), page.name
        assert answer["fields"] == {k: want[k] for k in ("name", "datetime", "status")}, answer["texts"]
