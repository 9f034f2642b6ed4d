"""The door as an ASGI app: inference routes, health, metrics, the page, and the layers around them.

From the outside in: Observe (request id, access log, metrics), CORS (when origins are configured),
Intake (whole bodies within a size and a time), then FastAPI's routing, where each inference route
checks its key, media type, schema and the model's limits before anything is sent to Triton.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import mark_process_dead
from starlette.middleware.cors import CORSMiddleware

from door.canary import Canary, check
from door.contract import Contract
from door.health import StubBook, readiness
from door.intake import Intake
from door.observe import Metrics, Observe, exposition, multiprocess
from door.openai_api import openai_router
from door.openapi import problems_in_their_media_type, with_schemas
from door.problems import HANDLERS
from door.routes import Routes
from door.settings import DoorSettings
from door.tei_api import tei_router
from door.upstream import Upstream
from kit.control.canary import Report

STATIC = Path(__file__).resolve().parent / "static"
DEFAULT_CAP = 64 * 1024  # a body on any route that does not read one
PAGE_POLICY = "default-src 'self'; img-src 'self' blob: data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
DESCRIPTION = (
    "Typed routes in front of the kit's Triton models. Limits come from the served model configs; overload "
    "is answered 429 with Retry-After; errors are RFC 9457 problems. See docs/DOOR.md."
)


def create_app(contract: Contract, settings: DoorSettings, upstream: Upstream | None = None) -> FastAPI:
    upstream = upstream or Upstream(settings, contract)
    metrics = Metrics(upstream.flows, upstream.shared.watchers)
    canary = None
    if contract.canary is not None:
        model = contract.canary_model

        async def check_served() -> Report:
            """The golden set the served model carries now, through it; a new version brings its own."""
            canary.golden = await upstream.golden_set(model) or canary.golden
            report = await check(upstream, model, canary.golden)
            canary.version = upstream.versions.get(model)
            return report

        def changed() -> bool:
            return upstream.versions.get(model, canary.version) != canary.version

        canary = Canary(contract.canary, check_served, settings.canary_interval, metrics.registry, changed)

    @asynccontextmanager
    async def lifespan(_):
        await upstream.open()  # the gRPC asyncio client belongs to the server's event loop
        watch = None
        if canary is not None:
            await canary.run()  # before serving, so that the door's first readiness answer has a verdict
            watch = asyncio.create_task(canary.watch())
        # What the door has built by now (its routes, schemas, contract and clients) lives as long as it does: frozen,
        # out of the collector's sight, a full collection under load (about one a second) took 1-6 ms instead of 35-62.
        gc.freeze()
        try:
            yield
        finally:
            if watch is not None:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
            await upstream.close()
            if multiprocess():
                mark_process_dead(os.getpid())  # this worker's live gauges leave the door's totals

    # The docs page's Swagger UI from a package, not a CDN: it must work where the door has no internet.
    app = FastAPIOffline(
        title="Triton kit front door",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        exception_handlers=HANDLERS,
        redirect_slashes=False,  # an API answers its exact paths; a redirected POST is no clear answer
    )
    routes = Routes(contract, settings, upstream)
    app.include_router(openai_router(contract, settings, upstream, routes.caps))  # before /v1/<route>: its own paths
    tei = tei_router(contract, settings, upstream, routes.caps)
    if tei is not None:
        app.include_router(tei)
    app.include_router(routes.router)
    app.state.upstream = upstream
    book = StubBook(settings.triton.rsplit(":", 1)[-1])

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = problems_in_their_media_type(with_schemas(FastAPI.openapi(app), routes.documents))
        return app.openapi_schema

    app.openapi = openapi

    @app.get("/health/live", tags=["health"])
    async def live() -> dict:
        """The door's process answers (says nothing of Triton)."""
        return {"live": True}

    @app.get("/health/ready", tags=["health"], responses={503: {"description": "not ready: the answer says what is not"}})
    async def ready() -> JSONResponse:
        """200 when Triton and every routed model are ready, no Python stub has died and the canary passed; else 503."""
        answer = await readiness(upstream, canary, book)
        return JSONResponse(answer, 200 if answer["ready"] else 503)

    @app.get("/metrics", tags=["health"], include_in_schema=False)
    async def door_metrics() -> Response:
        return Response(exposition(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Content-Security-Policy": PAGE_POLICY})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    app.add_middleware(
        Intake,
        caps=routes.caps,
        default_cap=DEFAULT_CAP,
        timeout=settings.body_timeout,
        max_in_flight=settings.max_in_flight,
        retry_after=lambda: max((flow.retry_after() for flow in upstream.flows.values()), default=1),
    )
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "X-API-Key", "Authorization", "X-Request-ID"],
            expose_headers=["X-Request-ID", "Retry-After"],
        )
    app.add_middleware(Observe, metrics=metrics)
    return app
