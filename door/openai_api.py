"""OpenAI's embeddings API on the door, for every served text encoder (a feature-extraction spec's entry): a client
that speaks it (OpenAI's own, or one written for vLLM, TEI or Infinity) switches to the kit by its base URL.

    POST /v1/embeddings  {"model": NAME, "input": "text" | ["text", ...], "encoding_format": "float" | "base64"}
    POST /v1/rerank      {"model": NAME, "query": "text", "documents": ["text", ...], "top_n": N}, for every cross-encoder
                         (a text-ranking spec's), as vLLM, Infinity and Jina answer it
    GET  /v1/models      every model the door serves

The answer is OpenAI's (`data` in input order, `usage` in the model's own tokens: every chunk's, special tokens
included, as the entry's TOKENS counts them); a long text is chunked as on the model's own route, and its embedding
is the same. Errors come in OpenAI's shape (door.problems.openai_error), with the door's statuses and Retry-After,
which OpenAI's client honours when it retries a 429 or 503. Keys: `Authorization: Bearer KEY`, as OpenAI's client
sends `api_key` (door.keys), or X-API-Key.
"""

from __future__ import annotations

import base64
from typing import Annotated, Literal

import numpy as np
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field, StrictStr

from door import schemas
from door.contract import Contract
from door.keys import KeyCheck
from door.openapi import problem_responses
from door.routes import ENVELOPE, JSON, JSON_ESCAPE, body_of, infer_pairs, infer_texts, json_body, parse, request_body
from door.settings import DoorSettings
from door.upstream import Upstream

OWNER = "triton-kit"
EMBEDDING = "text-embedding"  # the door answer (kit.control.specs.DOOR_ANSWERS) of a text encoder's entry
RANKING = "text-ranking"  # and of a cross-encoder's


class ErrorDetail(BaseModel):
    message: str
    type: str = Field(description="invalid_request_error, authentication_error, rate_limit_error or server_error")
    param: str | None = Field(description="the request field at fault, where one is")
    code: str | None = Field(description="the door's kind of problem (docs/DOOR.md), with underscores")


class OpenAIError(BaseModel):
    """OpenAI's error body."""

    error: ErrorDetail


class Embedding(BaseModel):
    object: Literal["embedding"]
    index: int = Field(description="the input's place in `input`")
    embedding: list[float] | str = Field(description="the vector, or base64 of its float32 little-endian bytes")


class Usage(BaseModel):
    prompt_tokens: int = Field(description="the model's tokens over every input's chunks, special tokens included")
    total_tokens: int


class EmbeddingsResult(BaseModel):
    object: Literal["list"]
    data: list[Embedding]
    model: str
    usage: Usage


class RerankDocument(BaseModel):
    text: str


class Reranked(BaseModel):
    index: int = Field(description="the document's place in `documents`")
    relevance_score: float = Field(description="its relevance to the query, 0 to 1: its chunks' best (or mean)")
    document: RerankDocument | None = Field(None, description="the document, where return_documents")


class RerankUsage(BaseModel):
    total_tokens: int = Field(description="the model's tokens over every chunk pair it read")


class RerankResult(BaseModel):
    id: str
    model: str
    usage: RerankUsage
    results: list[Reranked] = Field(description="the documents, most relevant first; the top_n of them")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


def embeddings_request(models: tuple[str, ...], max_text_bytes: int, max_texts: int) -> type[BaseModel]:
    """OpenAI's request, as strict as the door is: a served encoder's name, one text or 1 to `max_texts` of them (each
    at most `max_text_bytes` of UTF-8, not blank). Token arrays and `dimensions` are not taken (the kit embeds texts,
    and answers its model's own dimensions)."""
    Item = schemas.text_type(max_text_bytes)  # noqa: N806 (a type)
    Texts = Annotated[list[Item], Field(min_length=1, max_length=max_texts)]  # noqa: N806 (a type)

    class EmbeddingsRequest(schemas.Strict):
        model: Literal[models] = Field(description=f"a served text encoder: {', '.join(models)}")  # type: ignore[valid-type]
        input: Item | Texts = Field(description=f"one text, or 1 to {max_texts} texts, each embedded whole (chunked)")
        encoding_format: Literal["float", "base64"] = Field("float", description="a list of floats, or base64 of float32")
        user: StrictStr | None = Field(None, description="the caller, as OpenAI takes it (not used)")

    return EmbeddingsRequest


def rerank_request(models: tuple[str, ...], max_text_bytes: int, max_texts: int) -> type[BaseModel]:
    """The rerank request of vLLM, Infinity and Jina: a served cross-encoder's name, a query and its documents."""
    Item = schemas.text_type(max_text_bytes)  # noqa: N806 (a type)

    class RerankRequest(schemas.Strict):
        model: Literal[models] = Field(description=f"a served cross-encoder: {', '.join(models)}")  # type: ignore[valid-type]
        query: Item = Field(description="the query, read whole beside each chunk of each document")
        documents: list[Item] = Field(min_length=1, max_length=max_texts, description=f"1 to {max_texts} documents")
        top_n: int | None = Field(None, ge=1, description="answer the N most relevant (default: every document)")
        return_documents: bool = Field(True, description="each result carries its document's text")

    return RerankRequest


def encoded(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector.tolist()


def openai_router(contract: Contract, settings: DoorSettings, upstream: Upstream, caps: dict[str, int]) -> APIRouter:
    """OpenAI's routes for `contract`'s models; `caps` gets their body limits (door.intake)."""
    with_keys = bool(settings.api_keys)
    router = APIRouter(
        dependencies=[Depends(KeyCheck(settings.api_keys))] if with_keys else [],
        responses=problem_responses(with_keys, OpenAIError),
        tags=["openai"],
    )
    names = tuple(contract.models)

    @router.get("/v1/models", response_model=ModelList)
    async def models() -> dict:
        """Every model the door serves, as OpenAI lists models."""
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": OWNER} for name in names]}

    add_rerank(router, contract, settings, upstream, caps)
    encoders = tuple(name for name, served in contract.models.items() if served.answer == EMBEDDING)
    if not encoders:
        return router
    limits = {name: contract[name].settings.max_text_bytes for name in encoders}
    schema = embeddings_request(encoders, max(limits.values()), settings.max_texts)
    caps["/v1/embeddings"] = JSON_ESCAPE * max(limits.values()) + ENVELOPE

    async def embeddings(request: Request) -> dict:
        body = parse(schema, await body_of(request, JSON))
        texts = [body.input] if isinstance(body.input, str) else body.input
        outcomes = await infer_texts(upstream, body.model, texts, limits[body.model], request.state.request_id)
        data = [
            {"object": "embedding", "index": i, "embedding": encoded(outputs["EMBEDDING"].reshape(-1), body.encoding_format)}
            for i, outputs in enumerate(outcomes)
        ]
        tokens = sum(int(outputs["TOKENS"].reshape(-1)[0]) for outputs in outcomes)
        return {"object": "list", "data": data, "model": body.model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    embeddings.__doc__ = f"OpenAI's embeddings of one text or several, by a served text encoder ({', '.join(encoders)})."
    router.add_api_route(
        "/v1/embeddings",
        embeddings,
        methods=["POST"],
        response_model=EmbeddingsResult,
        openapi_extra=request_body(json_body(schema)),
    )
    return router


def add_rerank(router: APIRouter, contract: Contract, settings: DoorSettings, upstream: Upstream, caps: dict[str, int]) -> None:
    """POST /v1/rerank, where the door serves a cross-encoder."""
    rankers = tuple(name for name, served in contract.models.items() if served.answer == RANKING)
    if not rankers:
        return
    limits = {name: contract[name].settings.max_text_bytes for name in rankers}
    schema = rerank_request(rankers, max(limits.values()), settings.max_texts)
    caps["/v1/rerank"] = JSON_ESCAPE * max(limits.values()) + ENVELOPE

    async def rerank(request: Request) -> dict:
        body = parse(schema, await body_of(request, JSON))
        rid = request.state.request_id
        outcomes = await infer_pairs(upstream, body.model, body.query, body.documents, limits[body.model], rid)
        scores = [float(outputs["SCORE"].reshape(-1)[0]) for outputs in outcomes]
        best = sorted(range(len(scores)), key=lambda i: -scores[i])[: body.top_n]
        results = [
            {"index": i, "relevance_score": scores[i]}
            | ({"document": {"text": body.documents[i]}} if body.return_documents else {})
            for i in best
        ]
        tokens = sum(int(outputs["TOKENS"].reshape(-1)[0]) for outputs in outcomes)
        return {"id": rid, "model": body.model, "usage": {"total_tokens": tokens}, "results": results}

    rerank.__doc__ = f"The documents by their relevance to the query, by a served cross-encoder ({', '.join(rankers)})."
    router.add_api_route(
        "/v1/rerank", rerank, methods=["POST"], response_model=RerankResult, openapi_extra=request_body(json_body(schema))
    )
