"""Served `health_code` on generated screenshots: colour, QR payload and the printed fields."""

from __future__ import annotations

import pytest

from clients.health_code import HealthCodeClient
from clients.ocr import OcrClient
from tests.ocr_cases import health_codes, read_all


@pytest.fixture(scope="module")
def shots():
    return health_codes(per_color=3)


@pytest.fixture(scope="module")
def results(server, shots):
    return read_all(HealthCodeClient, server.options.grpc_url, [shot.data for shot in shots])


def test_colour_is_right_on_every_screenshot_of_each_colour(shots, results):
    assert {shot.color for shot in shots} == {"green", "yellow", "red", "unknown"}
    assert [r["color"] for r in results] == [shot.color for shot in shots]


def test_qr_payload_is_decoded_and_missing_code_is_null(shots, results):
    assert [r["qr"] for r in results] == [shot.qr for shot in shots]


def test_printed_fields_are_read(shots, results):
    for shot, result in zip(shots, results):
        assert result["fields"] == {"name": shot.name, "datetime": shot.datetime, "status": shot.status}, result["texts"]


def test_texts_are_the_ocr_models_texts(server, shots, results):
    client = OcrClient(server.options.grpc_url, "grpc")
    assert [line.text for line in client.read(shots[0].data)] == results[0]["texts"]
    client.close()


def test_base64_json_over_plain_http_gives_the_same_result(server, shots, results):
    client = HealthCodeClient(server.options.http_url, "http", base64_json=True)
    assert client.read(shots[1].data) == results[1]
