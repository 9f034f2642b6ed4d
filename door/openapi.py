"""The door's OpenAPI document, told as the routes answer: every status an inference route can return,
its errors as RFC 9457 problems in `application/problem+json` (FastAPI would list them as plain JSON),
Retry-After where the door sends it. The request schemas carry the served limits (door.schemas)."""

from __future__ import annotations

from door.problems import MEDIA_TYPE
from door.schemas import ProblemBody

RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds to wait before trying again (docs/DOOR.md: measured per model)",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    }
}
# What each status means on an inference route, in the order the door checks (docs/DOOR.md#limits).
STATUSES = {
    400: (
        "the body is not JSON, form or base64 as it should be, or a pixels body's data is not the length its shape "
        "needs (malformed-body)",
        {},
    ),
    401: ("no valid key (X-API-Key, or Authorization: Bearer), where the door has keys (missing-api-key)", {}),
    408: ("the body did not arrive in full in time (body-timeout)", {}),
    413: ("the body, a text or an image is over its limit (body-too-large, text-too-large, image-too-large)", {}),
    415: ("the body's or the image's media type is not one the route reads (unsupported-media-type, unsupported-image)", {}),
    422: ("the body does not fit the schema, or the model refused the input (invalid-request, invalid-input)", {}),
    429: ("the model's queue is full (overloaded)", RETRY_AFTER),
    502: ("Triton failed on this request (upstream-error)", {}),
    503: ("Triton is unavailable or restarting (unavailable)", RETRY_AFTER),
    504: ("Triton did not answer in time (upstream-timeout)", {}),
}
PROBLEM_SCHEMA = {"$ref": f"#/components/schemas/{ProblemBody.__name__}"}


def problem_responses(with_keys: bool, body: type = ProblemBody, statuses=STATUSES) -> dict[int, dict]:
    """The problem answers of an inference route, as `body` (the door's problem, or another API's error shape);
    401 only where the door has keys."""
    return {
        status: {"model": body, "description": description, **({"headers": headers} if headers else {})}
        for status, (description, headers) in statuses.items()
        if status != 401 or with_keys
    }


def problems_in_their_media_type(document: dict) -> dict:
    """Every response whose schema is a problem body is served as application/problem+json."""
    for path in document["paths"].values():
        for operation in path.values():
            for response in operation.get("responses", {}).values():
                content = response.get("content", {})
                if content.get("application/json", {}).get("schema") == PROBLEM_SCHEMA:
                    response["content"] = {MEDIA_TYPE: content["application/json"]}
    return document


def inlined(schema: dict) -> dict:
    """A request schema with its `$defs` put in place: a route's `requestBody` schema sits inside the document,
    where pydantic's `#/$defs/...` references would point at the document's root."""
    defs = schema.get("$defs", {})

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                rest = {key: value for key, value in node.items() if key != "$ref"}
                return walk({**defs[node["$ref"].rsplit("/", 1)[1]], **rest})
            return {key: walk(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(schema)


def with_schemas(document: dict, schemas: dict[str, dict]) -> dict:
    """`document` with `schemas` among its components: the answers a config gives as JSON Schema (door.routes)."""
    document.setdefault("components", {}).setdefault("schemas", {}).update(schemas)
    return document
