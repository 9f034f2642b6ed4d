"""The inference routes, one per served model that names one; each turns a checked body into the model's tensors
and the model's outputs into a typed answer, as its config's `door_answer` says (door.contract). The body is parsed
here (not by FastAPI) so that a request's key and media type are checked before its body is, and image routes can
read both JSON and forms."""

from __future__ import annotations

import binascii
import functools
import json
import math
from collections.abc import Callable

import numpy as np
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from tritonclient.utils import triton_to_np_dtype

from door import images, schemas
from door.contract import Contract, Served
from door.keys import KeyCheck
from door.openapi import inlined, problem_responses
from door.problems import Problem, invalid
from door.settings import DoorSettings
from door.upstream import Upstream, gathered
from kit.control.configs import wire_type

JSON = "application/json"
FORM = "multipart/form-data"
RAW = "application/octet-stream"  # a pixels route's float32 bytes, their shape in the query
ENVELOPE = 64 * 1024  # room in a body for JSON keys, form headers and boundaries
TENSOR_BODY = 16 * 1024 * 1024  # a tensor route's body: JSON numbers of any count, so a fixed cap
JSON_ESCAPE = 6  # a JSON string may spell each byte of its text as \u00XX
IMAGE_TYPES = "image/png, image/jpeg, image/bmp, image/webp"
IMAGES = "images"  # the OpenAPI tag of the routes that take an encoded image
# Each answer's description of its route in the OpenAPI document, where the config gives none (`door_description`).
DESCRIPTIONS = {
    "text-score": "{model}: a text's probability, and each chunk's it was split into (a list for `texts`).",
    "text-labels": "{model}: each label's probability for a text, and for each chunk it was split into (a list for `texts`).",
    "text-embedding": "{model}: a text's embedding, and each chunk's it was split into (a list for `texts`).",
    "image-labels": "{model}: each label's probability for an image of any size.",
    "image-lines": "{model}: the text lines of an image, with their scores and boxes.",
    "image-document": "{model}: the document the model reads from an image.",
    "pixels-classes": "{model}: class probabilities of one normalised image of any size.",
    "tensors": "{model}, as its spec serves it: every input and output by the model's tensor names.",
    "text-ranking": "{model}: each document's relevance to a query, and each chunk's it was cut into beside the query.",
    "text-entities": "{model}: the entities of a text, each with its type, score and characters (a list for `texts`).",
}


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def body_of(request: Request, *accepted: str) -> bytes:
    """The request's body, once its media type is one of `accepted` (415 otherwise)."""
    if media_type(request) not in accepted:
        raise Problem(415, "unsupported-media-type", f"send the body as {' or '.join(accepted)}")
    # door.intake hands the app the body in one message; Request.body() would join it with the stream's closing
    # b"", a copy of the whole body (0.6 ms of CPU for an image's 2.4 MB).
    chunks = [chunk async for chunk in request.stream() if chunk]
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse(model: type[BaseModel], body: bytes):
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise invalid(exc.errors()) from None


def json_body(schema: type[BaseModel]) -> dict:
    return {"application/json": {"schema": inlined(schema.model_json_schema())}}


def request_body(content: dict) -> dict:
    return {"requestBody": {"required": True, "content": content}}


class Routes:
    """The routes of one door: the contract's limits, its settings and its connection to Triton."""

    def __init__(self, contract: Contract, settings: DoorSettings, upstream: Upstream):
        self.contract, self.settings, self.upstream = contract, settings, upstream
        self.caps: dict[str, int] = {}
        self.documents: dict[str, dict] = {}  # the JSON Schemas of JSON documents' answers, by their component's name
        # The key and its 401 are in the document only where the door has keys: a door without any takes no key.
        with_keys = bool(settings.api_keys)
        self.router = APIRouter(
            prefix="/v1",
            dependencies=[Depends(KeyCheck(settings.api_keys))] if with_keys else [],
            responses=problem_responses(with_keys),
            tags=["inference"],
        )
        for model, served in contract.models.items():
            self.add_route(model, served)

    def add_route(self, model: str, served: Served) -> None:
        """The route of `served`'s answer."""
        doc = served.description or DESCRIPTIONS[served.answer].format(model=model)
        if served.answer == "text-score":
            self.add_text_route(model, score_result, schemas.score_result(model), doc)
        elif served.answer == "text-labels":
            answer = functools.partial(labelled_result, served.labels)
            self.add_text_route(model, answer, schemas.labelled_result(model, served.labels), doc)
        elif served.answer == "text-embedding":
            self.add_text_route(model, embedding_result, schemas.embedding_result(model, served.dimensions), doc)
        elif served.answer == "text-entities":
            self.add_text_route(model, entities_result, schemas.entities_result(model, served.labels), doc)
        elif served.answer == "image-labels":
            answer = functools.partial(image_labelled_result, served.labels)
            self.add_image_route(model, answer, schemas.image_labelled_result(model, served.labels), doc)
        elif served.answer == "image-lines":
            self.add_image_route(model, lines_result, schemas.lines_result(model), doc)
        elif served.answer == "image-document":
            self.add_image_route(model, document_result, None, doc, served.schema)
        elif served.answer == "pixels-classes":
            self.add_pixels_route(model, doc)
        elif served.answer == "text-ranking":
            self.add_ranking_route(model, doc)
        else:
            self.add_tensor_route(model, served, doc)

    async def body(self, request: Request, *accepted: str) -> bytes:
        return await body_of(request, *accepted)

    def text_body(self, model: str, request: Callable[[int, int], type[BaseModel]]) -> tuple[str, int, type[BaseModel]]:
        """A text route's path, the model's limit on a text's UTF-8 bytes and the route's request schema (`request` of
        that limit and the door's most texts a request); the path's body cap allows the limit's worth of JSON escapes."""
        path = self.contract[model].route
        limit = self.contract[model].settings.max_text_bytes
        self.caps[path] = JSON_ESCAPE * limit + ENVELOPE
        return path, limit, request(limit, self.settings.max_texts)

    def add_post(
        self, path: str, route: Callable, model: str, doc: str, result, schema: type[BaseModel], others: dict | None = None
    ) -> None:
        """`route` as POST `path`, named for the model and described by `doc` in the OpenAPI document: a JSON body of
        `schema` in (or one of `others`: media type -> its content and query parameters), `result` out."""
        route.__name__, route.__doc__ = model, doc
        extra = request_body(json_body(schema) | {media: content for media, (content, _) in (others or {}).items()})
        parameters = [parameter for _, query in (others or {}).values() for parameter in query]
        self.router.add_api_route(
            path.removeprefix("/v1"),
            route,
            methods=["POST"],
            response_model=result,
            openapi_extra=extra | ({"parameters": parameters} if parameters else {}),
        )

    def add_text_route(self, model: str, answer: Callable, result: type[BaseModel], doc: str) -> None:
        """A text model's route: `text` or `texts` in, each text's answer (`answer` of its outputs) out."""
        path, limit, schema = self.text_body(model, schemas.text_request)

        async def text_route(request: Request):
            body = parse(schema, await self.body(request, JSON))
            texts = [body.text] if body.text is not None else body.texts
            outcomes = await infer_texts(self.upstream, model, texts, limit, request.state.request_id)
            results = [answer(outputs) for outputs in outcomes]
            return results[0] if body.text is not None else results

        self.add_post(path, text_route, model, doc, result | list[result], schema)

    def add_ranking_route(self, model: str, doc: str) -> None:
        """A cross-encoder's route: a query and its documents in, each document's relevance and its chunks' out, in the
        documents' order."""
        path, limit, schema = self.text_body(model, schemas.ranking_request)

        async def ranking_route(request: Request):
            body = parse(schema, await self.body(request, JSON))
            outcomes = await infer_pairs(self.upstream, model, body.query, body.documents, limit, request.state.request_id)
            return {"documents": [{"index": i, **score_result(outputs)} for i, outputs in enumerate(outcomes)]}

        self.add_post(path, ranking_route, model, doc, schemas.ranking_result(model), schema)

    def add_image_route(
        self, model: str, answer: Callable, result: type[BaseModel] | None, doc: str, document: dict | None = None
    ) -> None:
        """An image model's route: one image in, as a form upload or base64 in JSON; `answer` of its outputs out, of the
        type `result`, or a JSON document of the JSON Schema `document`."""
        served = self.contract[model]
        path = served.route
        max_bytes, max_pixels = served.image_limits
        schema = schemas.image_request(max_bytes, max_pixels)
        self.caps[path] = math.ceil(max_bytes * 4 / 3) + ENVELOPE
        form = {
            "schema": {
                "type": "object",
                "properties": {"image": {"type": "string", "format": "binary"}},
                "required": ["image"],
                "additionalProperties": False,
            },
            "encoding": {"image": {"contentType": IMAGE_TYPES}},
        }

        async def image_route(request: Request):
            if media_type(request) == FORM:  # the form's parser reads the body
                data = await uploaded(request)
            else:  # JSON, or a 415 that names both
                body = await self.body(request, JSON, FORM)
                data = await run_in_threadpool(images.from_base64, parse(schema, body).image, max_bytes)
            data = await run_in_threadpool(images.checked, data, max_bytes, max_pixels)
            return answer(await self.upstream.infer_image(model, data, request.state.request_id))

        image_route.__name__ = model
        image_route.__doc__ = doc + " The image as a form upload (field `image`) or as base64 in JSON."
        extra = request_body({**json_body(schema), FORM: form})
        if document is not None:
            name = document.get("title") or f"{schemas.title_case(model)}Result"
            self.documents[name] = document
            extra["responses"] = {"200": {"content": {JSON: {"schema": {"$ref": f"#/components/schemas/{name}"}}}}}
        self.router.add_api_route(
            path.removeprefix("/v1"),
            image_route,
            methods=["POST"],
            response_model=result,
            openapi_extra=extra,
            tags=[IMAGES],  # beside the router's: a client or fuzzer can tell the routes whose bodies are images
        )

    def add_pixels_route(self, model: str, doc: str) -> None:
        """A pixel tensor's route: one normalised image of any size as raw float32, in JSON (base64) or as the bytes
        themselves (`?shape=` in the query); each class's probability out."""
        served = self.contract[model]
        channels = served.dims["INPUT"][0]
        max_pixels = served.settings.max_image_pixels
        schema = schemas.pixels_request(channels, max_pixels)
        shape_type = TypeAdapter(schemas.pixels_shape(channels, max_pixels))
        result = schemas.classes_result(model, served.labels)
        self.caps[served.route] = math.ceil(4 * channels * max_pixels * 4 / 3) + ENVELOPE

        async def pixels_route(request: Request):
            if media_type(request) == RAW:  # the bytes as they are: nothing to decode, no copy
                shape = query_shape(request.query_params.get("shape"), shape_type)
                check_pixels(shape, max_pixels)
                array = float32_array(await self.body(request, RAW), shape)
            else:  # JSON, or a 415 that names both
                body = parse(schema, await self.body(request, JSON, RAW))
                check_pixels(body.shape, max_pixels)
                array = float32_array(base64_data(body.data), body.shape)  # SIMD base64: no thread to hop to
            tensor = array[np.newaxis] if served.batched else array
            outputs = await self.upstream.infer(model, {"INPUT": tensor}, request.state.request_id)
            return classes_result(outputs["PROBS"].reshape(-1), served.labels)

        raw = ({"schema": {"type": "string", "format": "binary"}}, [schemas.pixels_query(channels, max_pixels)])
        doc += " As JSON (base64 data), or as the bytes themselves (application/octet-stream, the shape in the query)."
        self.add_post(served.route, pixels_route, model, doc, result, schema, {RAW: raw})

    def add_tensor_route(self, model: str, served: Served, doc: str) -> None:
        """A spec's model (kit.control.specs): its inputs as nested JSON arrays in, its outputs out, by tensor name."""
        inputs = {name: (wire_type(kind), dims) for name, (kind, dims) in served.spec.inputs.items()}
        outputs = {name: (wire_type(kind), dims) for name, (kind, dims) in served.spec.output_types.items()}
        schema = schemas.tensor_request(model, inputs, served.batched, served.max_batch_size)
        self.caps[served.route] = TENSOR_BODY

        async def tensor_route(request: Request):
            body = parse(schema, await self.body(request, JSON))
            arrays = checked_tensors(body.inputs.model_dump(by_alias=True), inputs, served)
            answer = await self.upstream.infer(model, arrays, request.state.request_id)
            return {"outputs": {name: json_values(answer[name]) for name in outputs}}

        result = schemas.tensor_result(model, outputs, served.batched, served.max_batch_size)
        self.add_post(served.route, tensor_route, model, doc, result, schema)


async def infer_texts(upstream: Upstream, model: str, texts: list[str], limit: int, request_id: str) -> list[dict]:
    """Each text's outputs from the text model `model`, all asked at once (in one request where the model takes several,
    door.coalesce); 413 for a text over `limit` bytes of UTF-8 before any is sent, and the first refusal where one is
    refused."""
    return await upstream.infer_texts(model, encoded(texts, limit), request_id)


def encoded(texts: list[str], limit: int) -> list[bytes]:
    """Each text's UTF-8; 413 for the first over `limit` bytes."""
    raw = [text.encode("utf-8") for text in texts]
    for i, item in enumerate(raw):
        if len(item) > limit:
            raise Problem(413, "text-too-large", f"text {i} is {len(item)} bytes of UTF-8; the model takes at most {limit}")
    return raw


async def infer_pairs(
    upstream: Upstream, model: str, query: str, documents: list[str], limit: int, request_id: str
) -> list[dict]:
    """Each document's outputs, read beside `query` by the cross-encoder `model`, all asked at once; 413 for a text
    over `limit` bytes of UTF-8 before any is sent."""
    items = [query.encode("utf-8"), *(document.encode("utf-8") for document in documents)]
    for i, item in enumerate(items):
        if len(item) > limit:
            what = "the query" if i == 0 else f"document {i - 1}"
            raise Problem(413, "text-too-large", f"{what} is {len(item)} bytes of UTF-8; the model takes at most {limit}")
    query_tensor = np.array([items[0]], dtype=np.object_)
    return await gathered(
        upstream.infer(model, {"QUERY": query_tensor, "DOCUMENT": np.array([item], dtype=np.object_)}, request_id)
        for item in items[1:]
    )


def checked_tensors(values: dict[str, list], inputs: dict, served: Served) -> dict[str, np.ndarray]:
    """Each input as an array of its type and shape; rows alike in every input, within the model's batch."""
    arrays, rows = {}, set()
    for name, (wire, dims) in inputs.items():
        try:
            array = np.asarray(values[name], dtype=triton_to_np_dtype(wire))
        except (ValueError, OverflowError) as exc:
            raise Problem(422, "invalid-input", f"{name}: lists of one axis differ in length; a tensor is rectangular") from exc
        shape = array.shape[1:] if served.batched else array.shape
        fits = array.ndim == len(dims) + served.batched and all(d < 0 or d == n for d, n in zip(dims, shape))
        if not fits or 0 in array.shape:
            want = schemas.shape_words(dims, served.batched)
            raise Problem(422, "invalid-input", f"{name}: shape {list(array.shape)} does not fit {want}")
        if wire == "BYTES":
            array = np.vectorize(lambda text: text.encode("utf-8"), otypes=[np.object_])(array)
        elif np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
            raise Problem(422, "invalid-input", f"{name}: values beyond the range of {wire}")
        arrays[name] = array
        rows.add(array.shape[0])
    if served.batched and (len(rows) > 1 or max(rows) > served.max_batch_size):
        sizes = ", ".join(f"{name} {len(values[name])}" for name in inputs)
        raise Problem(422, "invalid-input", f"rows: {sizes}; every input takes the same 1 to {served.max_batch_size} rows")
    check_shared_axes(arrays, served)
    return arrays


def check_shared_axes(arrays: dict[str, np.ndarray], served: Served) -> None:
    """Inputs that share a named axis of the graph (token ids and their mask along `length`) agree on its length."""
    lengths: dict[str, dict[str, int]] = {}
    for name, axes in served.axes.items():
        for axis, length in zip(axes, arrays[name].shape[served.batched :]):
            if axis:
                lengths.setdefault(axis, {})[name] = length
    for axis, by_input in lengths.items():
        if len(set(by_input.values())) > 1:
            sizes = ", ".join(f"{name} {length}" for name, length in by_input.items())
            raise Problem(422, "invalid-input", f"axis {axis}: {sizes}; the inputs that share it take the same length")


def json_values(array: np.ndarray) -> list:
    """An output as JSON: text for bytes, null for a float JSON cannot carry (NaN, infinity)."""
    if array.dtype == np.object_:
        return np.vectorize(lambda item: item.decode("utf-8", "replace"), otypes=[np.object_])(array).tolist()
    if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
        return np.where(np.isfinite(array), array, None).tolist()
    return array.tolist()


async def uploaded(request: Request) -> bytes:
    form = await request.form(max_files=1, max_fields=8)
    upload = form.get("image")
    if not isinstance(upload, UploadFile) or set(form.keys()) != {"image"}:
        raise Problem(422, "invalid-request", "the form takes one file in the field `image`, and no other field")
    return await upload.read()


def query_shape(text: str | None, shape_type: TypeAdapter) -> tuple[int, int, int]:
    """A binary body's shape from the query (`?shape=3,224,224`), checked as a JSON body's `shape` is."""
    if text is None:
        raise Problem(422, "invalid-request", "a binary body's shape goes in the query: ?shape=channels,height,width")
    try:
        sides = [int(side) for side in text.split(",")]
    except ValueError:
        raise Problem(422, "invalid-request", f"shape: {text!r} is not integers separated by commas") from None
    try:
        return shape_type.validate_python(tuple(sides))
    except ValidationError as exc:
        raise invalid([{**error, "loc": ("shape", *error["loc"])} for error in exc.errors()]) from None


def check_pixels(shape: tuple[int, int, int], max_pixels: int) -> None:
    _, height, width = shape
    if height * width > max_pixels:
        raise Problem(
            413,
            "image-too-large",
            f"the image is {height}x{width} = {height * width} pixels; the model takes at most {max_pixels}",
        )


def base64_data(text: str) -> bytes:
    try:
        return images.strict_base64(text)
    except (binascii.Error, ValueError):
        raise Problem(400, "malformed-body", "data is not base64") from None


def float32_array(raw: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """`raw`'s float32 values as an array of `shape`, sharing its memory; 400 unless it holds exactly that many."""
    want = 4 * math.prod(shape)
    if len(raw) != want:
        raise Problem(400, "malformed-body", f"data holds {len(raw)} bytes; shape {list(shape)} needs {want} (float32)")
    return np.frombuffer(raw, dtype="<f4").reshape(shape)


def classes_result(probs: np.ndarray, labels: tuple[str, ...] = (), top: int = 5) -> dict:
    """A pixel classifier's answer: every class's probability, and the `top` most probable classes, each by its
    label name too where `labels` names them."""
    best = np.argsort(-probs, kind="stable")[:top]
    named = (lambda i: {"label": labels[i]}) if labels else (lambda i: {})
    return {"probs": probs.tolist(), "top": [{"index": int(i), "prob": float(probs[i])} | named(i) for i in best]}


def score_result(outputs) -> dict:
    """A text scorer's outputs: the text's probability and each chunk's, with its span."""
    spans = outputs["CHUNK_SPANS"].reshape(-1, 2)
    chunks = [{"start": int(s), "end": int(e), "score": float(c)} for (s, e), c in zip(spans, outputs["CHUNK_SCORES"])]
    return {"score": float(outputs["SCORE"].reshape(-1)[0]), "chunks": chunks}


def labelled_result(labels: tuple[str, ...], outputs) -> dict:
    """A text classifier's outputs by label name: the most probable label, every label's probability, each chunk's."""
    scores = outputs["SCORES"].reshape(-1)
    spans, chunk_scores = outputs["CHUNK_SPANS"].reshape(-1, 2), outputs["CHUNK_SCORES"].reshape(-1, len(labels))
    chunks = [
        {"start": int(start), "end": int(end), "scores": dict(zip(labels, row.tolist()))}
        for (start, end), row in zip(spans, chunk_scores)
    ]
    return {"label": labels[int(scores.argmax())], "scores": dict(zip(labels, scores.tolist())), "chunks": chunks}


def image_labelled_result(labels: tuple[str, ...], outputs) -> dict:
    """An image classifier's outputs by label name: the most probable label and every label's probability."""
    scores = outputs["SCORES"].reshape(-1)
    return {"label": labels[int(scores.argmax())], "scores": dict(zip(labels, scores.tolist()))}


def embedding_result(outputs) -> dict:
    """A text encoder's outputs: the text's embedding and each chunk's, with its span."""
    spans = outputs["CHUNK_SPANS"].reshape(-1, 2)
    chunks = outputs["CHUNK_EMBEDDINGS"].reshape(len(spans), -1)
    return {
        "embedding": outputs["EMBEDDING"].reshape(-1).tolist(),
        "chunks": [{"start": int(start), "end": int(end), "embedding": row.tolist()} for (start, end), row in zip(spans, chunks)],
    }


def entities_result(outputs) -> dict:
    """A token classifier's outputs: each entity's type, score, characters and words, and the windows' spans."""
    labels, words = outputs["ENTITY_LABELS"].reshape(-1), outputs["ENTITY_WORDS"].reshape(-1)
    scores, spans = outputs["ENTITY_SCORES"].reshape(-1), outputs["ENTITY_SPANS"].reshape(-1, 2)
    entities = [
        {
            "label": label.decode("utf-8"),
            "score": float(score),
            "start": int(start),
            "end": int(end),
            "word": word.decode("utf-8"),
        }
        for label, score, (start, end), word in zip(labels, scores, spans, words)
    ]
    windows = [{"start": int(start), "end": int(end)} for start, end in outputs["CHUNK_SPANS"].reshape(-1, 2)]
    return {"entities": entities, "chunks": windows}


def lines_result(outputs) -> dict:
    """A text reader's outputs: each line's text, score and box."""
    texts, scores, boxes = outputs["TEXTS"].reshape(-1), outputs["SCORES"].reshape(-1), outputs["BOXES"].reshape(-1, 4, 2)
    return {"lines": [{"text": t.decode("utf-8"), "score": float(s), "box": b.tolist()} for t, s, b in zip(texts, scores, boxes)]}


def document_result(outputs) -> dict:
    """A model's JSON document (its RESULT), as it wrote it."""
    return json.loads(outputs["RESULT"].reshape(-1)[0])
