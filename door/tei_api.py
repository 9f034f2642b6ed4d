"""text-embeddings-inference's routes on the door, for the one text model `--tei NAME` names (TEI serves one model):
a TEI client switches to the kit by its base URL.

    POST /embed    a text encoder's: {"inputs": "text" | ["text", ...], "normalize": true} -> [[floats], ...]
    POST /predict  a text classifier's: {"inputs": "text" | [["text"], ...]} -> [{"score", "label"}, ...] (best first)
    POST /rerank   a cross-encoder's: {"query": "text", "texts": ["text", ...]} -> [{"index", "score"}, ...] (best first)
    GET  /info     the model, as TEI describes its own

A long text is chunked, as on the model's own route, never truncated: `truncate` and `truncation_direction` are taken
and change nothing. `/predict`'s scores are each label's probability over the text's chunks (weighted by length);
with `raw_scores` they are the label's logit, the entry's LOGITS: the chunks' logits weighted by length, which for a
text of one chunk are the model's own. `/rerank`'s `raw_scores` is false only: a document's relevance is its chunks'
best (or mean) probability, which no logit stands for.

    POST /tokenize {"inputs": "text" | ["text", ...], "add_special_tokens": true} -> [[{"id", "text", "special", "start",
                   "stop"}, ...], ...], every TEI model's: each text read whole by the model's tokenizer

Errors come in TEI's shape, {"error", "error_type"} (door.problems.tei_error), with the door's statuses and
Retry-After; keys as `Authorization: Bearer KEY`, as TEI's clients send them, or X-API-Key.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field, RootModel

from door import schemas
from door.contract import Contract, ContractError, Served
from door.keys import KeyCheck
from door.openapi import problem_responses
from door.routes import (
    ENVELOPE,
    JSON,
    JSON_ESCAPE,
    body_of,
    encoded,
    gathered,
    infer_pairs,
    infer_texts,
    json_body,
    parse,
    request_body,
)
from door.settings import DoorSettings
from door.upstream import Upstream

# The door answers (kit.control.specs.DOOR_ANSWERS) TEI's routes serve: a text encoder's, classifier's, cross-encoder's.
ANSWERS = ("text-embedding", "text-labels", "text-ranking")
DIRECTIONS = Literal["left", "right", "Left", "Right"]


class TEIError(BaseModel):
    """TEI's error body."""

    error: str
    error_type: str = Field(description="Validation, Overloaded, Unhealthy or Backend")


class Prediction(BaseModel):
    score: float
    label: str


class Rank(BaseModel):
    index: int
    score: float
    text: str | None = None


class SimpleToken(BaseModel):
    """A token as TEI's /tokenize answers it: its text is the input's where it covers some (offsets in UTF-8 bytes, as
    TEI's), else the tokenizer's own name for it (a special token, without offsets)."""

    id: int
    text: str
    special: bool
    start: int | None = Field(description="its first byte in the text's UTF-8; null for a special token")
    stop: int | None = Field(description="one past its last byte; null for a special token")


class EmbeddingModel(BaseModel):
    pooling: str


class ClassifierModel(BaseModel):
    id2label: dict[str, str]
    label2id: dict[str, int]


class Info(BaseModel):
    model_id: str
    model_sha: None
    model_type: dict[Literal["embedding", "classifier", "reranker"], EmbeddingModel | ClassifierModel]
    max_input_length: int = Field(description="the model's tokens per chunk; a longer text is chunked, not refused")
    max_batch_tokens: int = Field(description="the tokens of one full batch of chunks to the model")
    max_client_batch_size: int
    auto_truncate: bool
    version: str


def tei_model(contract: Contract, name: str) -> Served | None:
    """The model `--tei` names; ContractError where the door does not serve it or it is not a text encoder or
    classifier (the door refuses to start)."""
    if not name:
        return None
    if name not in contract:
        raise ContractError(f"--tei {name}: the server has no such model with a route (it serves {', '.join(contract.models)})")
    served = contract[name]
    if served.answer not in ANSWERS:
        raise ContractError(f"--tei {name}: its entry answers {served.answer}; TEI's routes serve {' or '.join(ANSWERS)}")
    return served


def texts_request(max_text_bytes: int, max_texts: int, read: str) -> type[schemas.Strict]:
    """TEI's `inputs` of one text or a list of them, each `read` as the route says; a route's request adds its own."""
    Item = schemas.text_type(max_text_bytes)  # noqa: N806 (a type)

    class TextsRequest(schemas.Strict):
        inputs: Item | Annotated[list[Item], Field(min_length=1, max_length=max_texts)] = Field(
            description=f"one text, or 1 to {max_texts} texts, {read}"
        )

    return TextsRequest


def embed_request(max_text_bytes: int, max_texts: int) -> type[BaseModel]:
    class EmbedRequest(texts_request(max_text_bytes, max_texts, "each embedded whole (chunked)")):
        normalize: bool = Field(True, description="L2-normalise each embedding")
        truncate: bool | None = Field(None, description="taken; the kit chunks a long text, it never truncates one")
        truncation_direction: DIRECTIONS | None = Field(None, description="taken; nothing is truncated")

    return EmbedRequest


def predict_request(max_text_bytes: int, max_texts: int) -> type[BaseModel]:
    """TEI's `inputs` for a classifier: a text, a text alone in a list, or a batch of such lists (TEI's pairs are a
    cross-encoder's: a classifier takes one text)."""
    Item = schemas.text_type(max_text_bytes)  # noqa: N806 (a type)
    Alone = Annotated[list[Item], Field(min_length=1, max_length=1)]  # noqa: N806 (a type)

    class PredictRequest(schemas.Strict):
        inputs: Item | Alone | Annotated[list[Alone], Field(min_length=1, max_length=max_texts)] = Field(
            description=f'a text, ["text"], or a batch of 1 to {max_texts} of [["text"], ...]'
        )
        raw_scores: bool = Field(
            False,
            description="false: each label's probability over the text's chunks (weighted by length); true: each label's "
            "logit, the chunks' logits weighted by length (a one-chunk text's are the model's own)",
        )
        truncate: bool | None = Field(None, description="taken; the kit chunks a long text, it never truncates one")
        truncation_direction: DIRECTIONS | None = Field(None, description="taken; nothing is truncated")

    return PredictRequest


def rerank_request(max_text_bytes: int, max_texts: int) -> type[BaseModel]:
    Item = schemas.text_type(max_text_bytes)  # noqa: N806 (a type)

    class RerankRequest(schemas.Strict):
        query: Item = Field(description="the query, read whole beside each chunk of each text")
        texts: list[Item] = Field(min_length=1, max_length=max_texts, description=f"1 to {max_texts} texts to rank")
        raw_scores: Literal[False] = Field(False, description="false: each text's relevance, 0 to 1")
        return_text: bool = Field(False, description="each rank carries its text")
        truncate: bool | None = Field(None, description="taken; the kit chunks a long text, it never truncates one")
        truncation_direction: DIRECTIONS | None = Field(None, description="taken; nothing is truncated")

    return RerankRequest


def tokenize_request(max_text_bytes: int, max_texts: int) -> type[BaseModel]:
    class TokenizeRequest(texts_request(max_text_bytes, max_texts, "each read whole by the model's tokenizer")):
        add_special_tokens: bool = Field(True, description="the tokens the model adds around a text ([CLS], <s>, ...)")

    return TokenizeRequest


def simple_tokens(text: str, outputs: dict) -> list[dict]:
    """A text's tokens as TEI names them, from the tokenizer's (TOKENIZED_*: offsets in characters, [-1, -1] for a
    special token), in UTF-8 bytes of the text."""
    byte_at = np.cumsum([0, *(len(character.encode("utf-8")) for character in text)])
    ids, names = outputs["TOKENIZED_IDS"].reshape(-1), outputs["TOKENIZED_TEXTS"].reshape(-1)
    tokens = []
    for token_id, name, (start, end) in zip(ids, names, outputs["TOKENIZED_SPANS"].reshape(-1, 2)):
        if start < 0:
            tokens.append({"id": int(token_id), "text": name.decode("utf-8"), "special": True, "start": None, "stop": None})
        else:
            place = {"start": int(byte_at[start]), "stop": int(byte_at[end])}
            tokens.append({"id": int(token_id), "text": text[start:end], "special": False, **place})
    return tokens


def predictions(labels: tuple[str, ...], outputs: dict, raw: bool = False) -> list[dict]:
    """Each label's score, best first: its probability, or its logit where `raw`."""
    scores = outputs["LOGITS" if raw else "SCORES"].reshape(-1)
    return [{"score": float(scores[i]), "label": labels[i]} for i in np.argsort(-scores, kind="stable")]


def info(name: str, served: Served, max_texts: int) -> dict:
    settings = served.settings
    if served.answer == "text-embedding":
        kind = {"embedding": {"pooling": settings.pooling}}
    elif served.answer == "text-ranking":
        kind = {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}}
    else:
        labels = served.labels
        kind = {
            "classifier": {
                "id2label": {str(i): label for i, label in enumerate(labels)},
                "label2id": {l: i for i, l in enumerate(labels)},
            }
        }
    max_tokens = settings.buckets[-1]  # the largest length bucket is the model's token limit (kit.pipelines.text)
    return {
        "model_id": name,
        "model_sha": None,
        "model_type": kind,
        "max_input_length": max_tokens,
        "max_batch_tokens": max_tokens * settings.max_batch,
        "max_client_batch_size": max_texts,
        "auto_truncate": False,
        "version": "triton-kit",
    }


def tei_router(contract: Contract, settings: DoorSettings, upstream: Upstream, caps: dict[str, int]) -> APIRouter | None:
    """TEI's routes for the model `settings.tei` names; None where it names none. `caps` gets their body limits."""
    served = tei_model(contract, settings.tei)
    if served is None:
        return None
    name, limit = settings.tei, served.settings.max_text_bytes
    with_keys = bool(settings.api_keys)
    router = APIRouter(
        dependencies=[Depends(KeyCheck(settings.api_keys))] if with_keys else [],
        responses=problem_responses(with_keys, TEIError),
        tags=["text-embeddings-inference"],
    )

    @router.get("/info", response_model=Info)
    async def model_info() -> dict:
        """The model the TEI routes serve, as TEI describes its own."""
        return info(name, served, settings.max_texts)

    tokenize_schema = tokenize_request(limit, settings.max_texts)

    async def tokenize(request: Request) -> list[list[dict]]:
        body = parse(tokenize_schema, await body_of(request, JSON))
        texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
        asked = (
            upstream.tokenize(name, item, body.add_special_tokens, request.state.request_id) for item in encoded(texts, limit)
        )
        return [simple_tokens(text, outputs) for text, outputs in zip(texts, await gathered(asked))]

    tokenize.__doc__ = f"Each text's tokens by {name}'s tokenizer, as TEI answers (a list of tokens per text)."
    add(router, "/tokenize", tokenize, RootModel[list[list[SimpleToken]]], tokenize_schema, caps, limit, exclude_none=False)

    if served.answer == "text-embedding":
        schema = embed_request(limit, settings.max_texts)

        async def embed(request: Request) -> list[list[float]]:
            body = parse(schema, await body_of(request, JSON))
            texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
            outcomes = await infer_texts(upstream, name, texts, limit, request.state.request_id)
            vectors = [outputs["EMBEDDING"].reshape(-1).astype(np.float64) for outputs in outcomes]
            if body.normalize:
                vectors = [vector / (np.linalg.norm(vector) or 1.0) for vector in vectors]
            return [vector.tolist() for vector in vectors]

        embed.__doc__ = f"{name}'s embedding of each text, as TEI answers (a list of vectors)."
        add(router, "/embed", embed, RootModel[list[list[float]]], schema, caps, limit)
    elif served.answer == "text-ranking":
        schema = rerank_request(limit, settings.max_texts)

        async def rerank(request: Request) -> list[dict]:
            body = parse(schema, await body_of(request, JSON))
            outcomes = await infer_pairs(upstream, name, body.query, body.texts, limit, request.state.request_id)
            scores = [float(outputs["SCORE"].reshape(-1)[0]) for outputs in outcomes]
            texts = body.texts if body.return_text else [None] * len(scores)
            return [
                {"index": i, "score": scores[i], "text": texts[i]} for i in sorted(range(len(scores)), key=lambda i: -scores[i])
            ]

        rerank.__doc__ = f"The texts by their relevance to the query, by {name}, as TEI answers (best first)."
        add(router, "/rerank", rerank, RootModel[list[Rank]], schema, caps, limit)
    else:
        schema = predict_request(limit, settings.max_texts)

        async def predict(request: Request) -> list:
            body = parse(schema, await body_of(request, JSON))
            batch = isinstance(body.inputs, list) and isinstance(body.inputs[0], list)
            texts = (
                [item[0] for item in body.inputs] if batch else [body.inputs if isinstance(body.inputs, str) else body.inputs[0]]
            )
            outcomes = await infer_texts(upstream, name, texts, limit, request.state.request_id)
            answers = [predictions(served.labels, outputs, body.raw_scores) for outputs in outcomes]
            return answers if batch else answers[0]

        predict.__doc__ = f"{name}'s label probabilities for a text or a batch, best first, as TEI answers."
        add(router, "/predict", predict, RootModel[list[Prediction] | list[list[Prediction]]], schema, caps, limit)
    return router


def add(
    router: APIRouter, path: str, route, result, schema: type[BaseModel], caps: dict[str, int], limit: int, exclude_none=True
) -> None:
    """A TEI route; `exclude_none`: TEI leaves out what it does not answer (a rank's text, unless asked), but answers a
    special token's offsets as null."""
    caps[path] = JSON_ESCAPE * limit + ENVELOPE
    router.add_api_route(
        path,
        route,
        methods=["POST"],
        response_model=result,
        response_model_exclude_none=exclude_none,
        openapi_extra=request_body(json_body(schema)),
    )
