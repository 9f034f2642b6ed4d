"""Every error the door answers is an RFC 9457 problem: `application/problem+json` with type, title,
status and detail, plus the request's id, so that a client can branch on `type` and a person can
quote the id when asking why."""

from __future__ import annotations

from http import HTTPStatus

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:triton-kit:problem:"

# The door's own kinds of problem and their titles (docs/DOOR.md lists them with their statuses).
TITLES = {
    "malformed-body": "The body is not what the route reads",
    "invalid-request": "The request does not fit the route's schema",
    "unsupported-media-type": "The route does not read this Content-Type",
    "body-too-large": "The request body is over the route's limit",
    "body-timeout": "The request body did not arrive in time",
    "text-too-large": "A text is over the model's limit",
    "image-too-large": "The image is over the model's limit",
    "unsupported-image": "The image is not in a format the model reads",
    "missing-api-key": "An API key is needed",
    "invalid-input": "The model refused the input",
    "overloaded": "The model's queue or the door is full: retry after the time given",
    "unavailable": "Triton is unavailable or restarting: retry after the time given",
    "upstream-timeout": "Triton did not answer in time",
    "upstream-error": "Triton failed on this request",
}


class Problem(Exception):
    """An answer other than success, raised anywhere in a request and rendered by `problem_response`."""

    def __init__(self, status: int, kind: str, detail: str, headers: dict[str, str] | None = None, **extra):
        super().__init__(detail)
        self.status, self.kind, self.detail = status, kind, detail
        self.headers = headers or {}
        self.extra = extra


def request_id(scope) -> str | None:
    return scope.get("state", {}).get("request_id")


# The routes that speak another API (door.openai_api, door.tei_api) answer its clients' errors in that API's shape, the
# same statuses (and Retry-After) as every route: OpenAI's {"error": {"message", "type", "param", "code"}}, and
# text-embeddings-inference's {"error", "error_type"}.
OPENAI_PATHS = frozenset({"/v1/embeddings", "/v1/models", "/v1/rerank"})
TEI_PATHS = frozenset({"/embed", "/predict", "/rerank", "/tokenize", "/info"})
OPENAI_TYPES = {401: "authentication_error", 429: "rate_limit_error"}  # else invalid_request_error, or server_error
TEI_TYPES = {429: "Overloaded", 503: "Unhealthy"}  # else Validation (4xx) or Backend (5xx)


def openai_error(problem: Problem) -> dict:
    kind = OPENAI_TYPES.get(problem.status, "server_error" if problem.status >= 500 else "invalid_request_error")
    places = problem.extra.get("errors") or [{}]
    param = ".".join(places[0].get("loc", [])) or None
    return {"error": {"message": problem.detail, "type": kind, "param": param, "code": problem.kind.replace("-", "_")}}


def tei_error(problem: Problem) -> dict:
    return {
        "error": problem.detail,
        "error_type": TEI_TYPES.get(problem.status, "Backend" if problem.status >= 500 else "Validation"),
    }


def problem_response(problem: Problem, scope) -> JSONResponse:
    if scope.get("path") in OPENAI_PATHS | TEI_PATHS:
        body = (openai_error if scope["path"] in OPENAI_PATHS else tei_error)(problem)
        return JSONResponse(body, problem.status, headers=problem.headers)
    known = problem.kind in TITLES
    body = {
        "type": f"{TYPE_PREFIX}{problem.kind}" if known else "about:blank",
        "title": TITLES[problem.kind] if known else HTTPStatus(problem.status).phrase,
        "status": problem.status,
        "detail": problem.detail,
        "request_id": request_id(scope),
        **problem.extra,
    }
    return JSONResponse(body, problem.status, headers=problem.headers, media_type=MEDIA_TYPE)


async def on_problem(request: Request, exc: Problem) -> JSONResponse:
    return problem_response(exc, request.scope)


async def on_http_exception(request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette's own errors (404 for an unknown path, 405, 400 from the form parser) as problems."""
    kind = "malformed-body" if exc.status_code == 400 else f"http-{exc.status_code}"
    return problem_response(Problem(exc.status_code, kind, str(exc.detail), dict(exc.headers or {})), request.scope)


async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    return problem_response(invalid(exc.errors()), request.scope)


def invalid(errors) -> Problem:
    """A pydantic error list as a problem: 400 when the body is not JSON at all, else 422 with each error's place."""
    if any(error["type"] == "json_invalid" for error in errors):
        return Problem(400, "malformed-body", "the body is not valid JSON (UTF-8)")
    places = [{"loc": [str(part) for part in error["loc"]], "msg": error["msg"]} for error in errors]
    summary = "; ".join(f"{'.'.join(p['loc']) or 'body'}: {p['msg']}" for p in places)
    return Problem(422, "invalid-request", summary, errors=places)


HANDLERS = {Problem: on_problem, HTTPException: on_http_exception, RequestValidationError: on_validation_error}
