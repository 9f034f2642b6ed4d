"""The front door's app without a server: a fake upstream stands in for Triton, so these tests pin the
HTTP side (schemas, limits, problems, keys, ids, metrics, the page); tests/served/test_door_*.py hold
the answers to Triton's."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import re

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from door.app import create_app
from door.contract import contract_from_configs
from door.problems import Problem
from door.settings import DoorSettings
from door.upstream import Upstream
from tests.profiles import configs as built_configs

PROBLEM = "application/problem+json"


class FakeUpstream(Upstream):
    """Answers every model with fixed outputs, or raises `self.fail` when set."""

    fail: Problem | None = None
    sent: list

    async def open(self):
        self.sent = []

    async def close(self):
        pass

    async def infer(self, model, arrays, request_id=""):
        self.sent.append((model, arrays, request_id))
        if self.fail is not None:
            raise self.fail
        return {
            "radar": {
                "SCORE": np.array([0.75], np.float32),
                "CHUNK_SCORES": np.array([0.5, 1.0], np.float32),
                "CHUNK_SPANS": np.array([[0, 3], [4, 9]], np.int32),
            },
            "ocr": {
                "TEXTS": np.array([b"hello"], np.object_),
                "SCORES": np.array([0.9], np.float32),
                "BOXES": np.zeros((1, 4, 2), np.float32),
            },
            "health_code": {
                "RESULT": np.array(
                    [
                        json.dumps(
                            {"color": "green", "qr": None, "texts": [], "fields": dict.fromkeys(("name", "datetime", "status"))}
                        )
                    ],
                    np.object_,
                )
            },
            "resnet50": {"PROBS": np.linspace(0, 1, 1000, dtype=np.float32)[np.newaxis]},
        }[model]

    async def readiness(self):
        return {"server": True, **{model: True for model in self.contract.models}}

    async def golden_set(self, model):
        return self.contract.canary


@pytest.fixture(scope="module")
def contract(radar_artifacts):
    """The committed configs' contract without the canary's golden set: its requests would reach the fake
    upstream beside the ones these tests send (tests/unit/test_canary.py tests it)."""
    return dataclasses.replace(contract_from_configs(built_configs("cpu")), canary=None)


def door(contract, **settings):
    # A request per text (no coalescing), which the fake answers: tests/served/test_door_coalesce.py coalesces.
    settings = DoorSettings(**{"coalesce_in_flight": 0, **settings})
    upstream = FakeUpstream(settings, contract)
    return TestClient(create_app(contract, settings, upstream)), upstream


@pytest.fixture
def client(contract):
    test_client, upstream = door(contract)
    with test_client:
        test_client.upstream = upstream
        yield test_client


def png(width=20, height=10) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, "PNG")
    return buffer.getvalue()


def assert_problem(response, status, kind):
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["type"] == f"urn:triton-kit:problem:{kind}" and body["status"] == status and body["title"] and body["detail"]
    assert body["request_id"] == response.headers["x-request-id"]
    return body


def test_radar_answers_score_and_chunks_from_the_models_outputs(client):
    response = client.post("/v1/radar", json={"text": "abc defgh"})
    assert response.status_code == 200
    assert response.json() == {
        "score": 0.75,
        "chunks": [{"start": 0, "end": 3, "score": 0.5}, {"start": 4, "end": 9, "score": 1.0}],
    }
    model, arrays, _ = client.upstream.sent[-1]
    assert model == "radar" and arrays["TEXT"].tolist() == [b"abc defgh"]
    several = client.post("/v1/radar", json={"texts": ["a", "b", "c"]})
    assert several.status_code == 200 and len(several.json()) == 3


def test_image_routes_take_a_form_upload_or_base64_json_and_send_the_raw_bytes(client):
    data = png()
    by_form = client.post("/v1/ocr", files={"image": ("x.png", data, "image/png")})
    by_json = client.post("/v1/ocr", json={"image": base64.b64encode(data).decode()})
    assert by_form.status_code == by_json.status_code == 200
    assert (
        by_form.json() == by_json.json() == {"lines": [{"text": "hello", "score": pytest.approx(0.9), "box": [[0.0, 0.0]] * 4}]}
    )
    assert [arrays["IMAGE"].tolist() for _, arrays, _ in client.upstream.sent] == [[data], [data]]
    assert client.post("/v1/health-code", files={"image": ("x.png", data)}).json()["color"] == "green"
    extra = client.post("/v1/ocr", files={"image": ("x.png", data, "image/png")}, data={"note": "x"})
    assert "no other field" in assert_problem(extra, 422, "invalid-request")["detail"], "the form's schema has no other field"


def test_resnet_takes_base64_float32_and_sends_a_batch_of_one(client):
    image = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    response = client.post("/v1/resnet50", json={"shape": [3, 4, 5], "data": base64.b64encode(image.tobytes()).decode()})
    assert response.status_code == 200
    assert [row["index"] for row in response.json()["top"]] == [999, 998, 997, 996, 995]
    assert all(set(row) == {"index", "prob"} for row in response.json()["top"])  # its classes have no names
    np.testing.assert_array_equal(client.upstream.sent[-1][1]["INPUT"], image[np.newaxis])


def test_resnet_takes_the_float32_bytes_with_the_shape_in_the_query_as_it_takes_json(client):
    image = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    raw = {"Content-Type": "application/octet-stream"}
    by_bytes = client.post("/v1/resnet50?shape=3,4,5", content=image.tobytes(), headers=raw)
    by_json = client.post("/v1/resnet50", json={"shape": [3, 4, 5], "data": base64.b64encode(image.tobytes()).decode()})
    assert by_bytes.status_code == 200 and by_bytes.json() == by_json.json()
    assert [arrays["INPUT"].tolist() for _, arrays, _ in client.upstream.sent] == [image[np.newaxis].tolist()] * 2


def test_bad_binary_pixels_get_a_clear_problem_and_reach_no_model(client, contract):
    raw = {"Content-Type": "application/octet-stream"}
    data = bytes(4 * 3 * 4 * 4)
    for query, status, kind in [
        ("", 422, "invalid-request"),
        ("?shape=3,4", 422, "invalid-request"),
        ("?shape=3,four,4", 422, "invalid-request"),
        ("?shape=1,4,4", 422, "invalid-request"),
        ("?shape=3,0,4", 422, "invalid-request"),
        ("?shape=3,4,5", 400, "malformed-body"),
        (f"?shape=3,{contract['resnet50'].settings.max_image_pixels},2", 413, "image-too-large"),
    ]:
        assert_problem(client.post(f"/v1/resnet50{query}", content=data, headers=raw), status, kind)
    assert client.upstream.sent == []


@pytest.mark.parametrize(
    "body, status, kind",
    [
        (b'{"text": ', 400, "malformed-body"),
        (b"\xff\xfe", 400, "malformed-body"),
        (b'{"text": "a", "texts": ["b"]}', 422, "invalid-request"),
        (b"{}", 422, "invalid-request"),
        (b'{"texts": []}', 422, "invalid-request"),
        (b'{"text": 7}', 422, "invalid-request"),
        (b'{"text": "a", "model": "radar_classifier"}', 422, "invalid-request"),
        (b"[]", 422, "invalid-request"),
    ],
)
def test_bad_radar_bodies_get_a_clear_problem_and_reach_no_model(client, body, status, kind):
    assert_problem(client.post("/v1/radar", content=body, headers={"Content-Type": "application/json"}), status, kind)
    assert client.upstream.sent == []


def test_limits_of_the_served_configs_are_enforced_before_triton(client, contract):
    limit = contract["radar"].settings.max_text_bytes
    assert_problem(client.post("/v1/radar", json={"text": "é" * (limit // 2 + 1)}), 413, "text-too-large")
    assert_problem(client.post("/v1/radar", json={"texts": ["a"] * 65}), 422, "invalid-request")
    assert_problem(
        client.post("/v1/radar", content=b" " * (7 << 20), headers={"Content-Type": "application/json"}), 413, "body-too-large"
    )
    pixels = contract["ocr"].image_limits[1]
    assert_problem(client.post("/v1/ocr", files={"image": ("x.png", png(pixels // 100 + 1, 100))}), 413, "image-too-large")
    assert_problem(client.post("/v1/ocr", files={"image": ("x.gif", b"GIF89a" + bytes(64))}), 415, "unsupported-image")
    assert_problem(client.post("/v1/ocr", json={"image": "not base64!"}), 400, "malformed-body")
    assert_problem(client.post("/v1/ocr", files={"file": ("x.png", png())}), 422, "invalid-request")
    side = int(contract["resnet50"].settings.max_image_pixels ** 0.5) + 1
    assert_problem(client.post("/v1/resnet50", json={"shape": [3, side, side], "data": "A" * 16}), 413, "image-too-large")
    assert_problem(client.post("/v1/resnet50", json={"shape": [1, 4, 4], "data": ""}), 422, "invalid-request")
    assert_problem(client.post("/v1/resnet50", json={"shape": [3, 4, 4], "data": "AAAA"}), 422, "invalid-request")
    one_pixel = base64.b64encode(bytes(4 * 3)).decode()  # valid data, of a 1 x 1 image: its shape says 4 x 4
    assert_problem(client.post("/v1/resnet50", json={"shape": [3, 4, 4], "data": one_pixel}), 400, "malformed-body")
    assert client.upstream.sent == []


def test_a_body_in_another_media_type_is_refused(client):
    assert_problem(
        client.post("/v1/radar", content=b'{"text": "a"}', headers={"Content-Type": "text/plain"}), 415, "unsupported-media-type"
    )
    assert_problem(client.post("/v1/radar", content=b'{"text": "a"}'), 415, "unsupported-media-type")


def test_api_keys_when_configured_are_needed_and_checked(contract):
    test_client, _ = door(contract, api_keys=frozenset({"secret"}))
    with test_client:
        body = assert_problem(test_client.post("/v1/radar", json={"text": "a"}), 401, "missing-api-key")
        assert "X-API-Key" in body["detail"]
        assert_problem(test_client.post("/v1/radar", json={"text": "a"}, headers={"X-API-Key": "wrong"}), 401, "missing-api-key")
        assert test_client.post("/v1/radar", json={"text": "a"}, headers={"X-API-Key": "secret"}).status_code == 200
        assert test_client.get("/health/live").status_code == 200, "health needs no key"


def test_overload_and_restarts_keep_their_retry_after(client):
    client.upstream.fail = Problem(429, "overloaded", "radar: Exceeds maximum queue size", {"Retry-After": "3"})
    response = client.post("/v1/radar", json={"text": "a"})
    assert_problem(response, 429, "overloaded")
    assert response.headers["retry-after"] == "3"


def test_request_ids_are_kept_when_sane_and_made_otherwise(client):
    assert client.get("/health/live", headers={"X-Request-ID": "abc-123"}).headers["x-request-id"] == "abc-123"
    made = client.get("/health/live", headers={"X-Request-ID": "bad id; <script>"}).headers["x-request-id"]
    assert made != "bad id" and len(made) == 32
    client.post("/v1/radar", json={"text": "a"}, headers={"X-Request-ID": "trace-7"})
    assert client.upstream.sent[-1][2] == "trace-7", "the id goes on to Triton"


def test_unknown_paths_and_methods_are_problems_too(client):
    assert client.get("/v2/models/radar/infer").status_code == 404
    assert client.get("/v2/models/radar/infer").headers["content-type"] == PROBLEM
    assert client.get("/v1/radar").status_code == 405


def test_metrics_count_requests_by_route_and_status(client):
    client.post("/v1/radar", json={"text": "a"})
    client.post("/v1/radar", json={})
    client.get("/nowhere/" + "x" * 50)
    text = client.get("/metrics").text
    assert 'door_requests_total{method="POST",route="/v1/radar",status="200"} 1.0' in text
    assert 'door_requests_total{method="POST",route="/v1/radar",status="422"} 1.0' in text
    assert 'route="unmatched"' in text and "xxxxx" not in text
    assert 'door_triton_in_flight{model="radar"} 0.0' in text
    assert "door_request_duration_seconds_bucket" in text and "door_requests_in_flight" in text


def test_openapi_document_states_the_served_limits(client, contract):
    document = client.get("/openapi.json").json()
    assert {"/v1/radar", "/v1/ocr", "/v1/health-code", "/v1/resnet50", "/health/ready"} <= set(document["paths"])
    radar = document["paths"]["/v1/radar"]["post"]
    schema = radar["requestBody"]["content"]["application/json"]["schema"]
    assert schema["properties"]["texts"]["maxItems"] == DoorSettings().max_texts
    assert schema["properties"]["text"]["maxLength"] == contract["radar"].settings.max_text_bytes
    assert not re.search(schema["properties"]["text"]["pattern"], " \t\u3000\x1c") and re.search(
        schema["properties"]["text"]["pattern"], " a "
    ), "a blank text is refused by the model, so by the schema"
    resnet = document["paths"]["/v1/resnet50"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert resnet["properties"]["shape"]["prefixItems"][0] == {"const": contract["resnet50"].dims["INPUT"][0], "type": "integer"}
    pixels = document["paths"]["/v1/resnet50"]["post"]
    assert set(pixels["requestBody"]["content"]) == {"application/json", "application/octet-stream"}
    assert [(p["name"], p["in"], p["required"]) for p in pixels["parameters"]] == [("shape", "query", False)]
    ocr = document["paths"]["/v1/ocr"]["post"]["requestBody"]["content"]
    assert set(ocr) == {"application/json", "multipart/form-data"}
    assert ocr["application/json"]["schema"]["properties"]["image"]["minLength"] == 1
    for path in ("/v1/radar", "/v1/ocr", "/v1/health-code", "/v1/resnet50"):
        responses = document["paths"][path]["post"]["responses"]
        assert {"400", "413", "415", "422", "429", "503"} <= set(responses) and "401" not in responses, "a door without keys"
        assert set(responses["429"]["content"]) == {PROBLEM} and responses["429"]["headers"]["Retry-After"]["required"]
    assert "securitySchemes" not in document.get("components", {}), "a door without keys asks for none"
    assert client.get("/docs").status_code == 200


def test_a_door_with_keys_documents_them_and_their_401(contract):
    keyed, _ = door(contract, api_keys=frozenset({"k"}))
    with keyed:
        document = keyed.get("/openapi.json").json()
    assert "APIKeyHeader" in document["components"]["securitySchemes"]
    assert set(document["paths"]["/v1/radar"]["post"]["responses"]["401"]["content"]) == {PROBLEM}


def test_the_page_and_its_files_are_served_with_a_strict_policy(client):
    page = client.get("/")
    assert page.status_code == 200 and 'id="score-text"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/static/page.js").status_code == 200
    assert "cdn" not in page.text.lower()
