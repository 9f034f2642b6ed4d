"""Request ids, one access-log line per request, and the door's own Prometheus metrics.

An `X-Request-ID` the client sends is kept (when it is a sane token) and otherwise one is made; it
comes back on the response, in problem bodies and in the access log, and goes to Triton as the
request's id. Metrics are labelled by route template, never by raw path, so a fuzzer cannot grow them.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from door.flow import Flow

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
HEADER = b"x-request-id"
SANE_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
access = logging.getLogger("door.access")


def multiprocess() -> bool:
    """Whether this process is one of several door workers: prometheus_client then keeps every value in files
    under $PROMETHEUS_MULTIPROC_DIR (chosen when it is first imported), and /metrics adds up all the workers'."""
    return bool(os.environ.get(MULTIPROC_ENV))


def exposition(registry: CollectorRegistry) -> bytes:
    """The metrics text: this process's registry, or every worker's values added up."""
    if not multiprocess():
        return generate_latest(registry)
    together = CollectorRegistry()
    MultiProcessCollector(together)
    return generate_latest(together)


class Metrics:
    """The door's metrics in a registry of their own (so that apps in one process do not collide). Gauges are
    set, not computed at scrape time, and say how workers' values combine (`livesum`: the door's total)."""

    def __init__(self, flows: dict[str, Flow], tensor_watchers: list[Callable[[str], None]]):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "door_requests",
            "Requests answered, by route, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "door_request_duration_seconds",
            "Time from a request's arrival to its answer, by route",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "door_requests_in_flight", "Requests the door is handling now", registry=self.registry, multiprocess_mode="livesum"
        )
        upstream = Gauge(
            "door_triton_in_flight",
            "Requests the door has sent to Triton and not had answered",
            ["model"],
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        for model, flow in flows.items():
            upstream.labels(model).set(flow.in_flight)
            flow.watchers.append(upstream.labels(model).set)
        large = Counter(
            "door_large_tensors",
            "Tensors to Triton of 64 KiB or more, by how they went: through shared memory or in the gRPC message",
            ["via"],
            registry=self.registry,
        )
        tensor_watchers.append(lambda via: large.labels(via).inc())


def route_of(scope) -> str:
    route = scope.get("route")
    return getattr(route, "path", None) or "unmatched"


class Observe:
    """ASGI middleware, outermost: everything below it, refusals included, is counted and logged."""

    def __init__(self, app, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(HEADER, b"")
        rid = given.decode() if SANE_ID.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        status = 500  # what an exception that escapes the app becomes
        start = time.perf_counter()
        counted = False

        def count() -> float:
            """Counted once, before the answer's last byte leaves: a client that has its answer reads metrics that
            hold it, whichever worker it asks next."""
            nonlocal counted
            seconds = time.perf_counter() - start
            if not counted:
                counted = True
                route = route_of(scope)
                self.metrics.in_flight.dec()
                self.metrics.requests.labels(route, scope["method"], str(status)).inc()
                self.metrics.latency.labels(route).observe(seconds)
            return seconds

        async def tagged(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (HEADER, rid.encode())]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                count()
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, tagged)
        finally:
            seconds = count()
            client = scope.get("client") or ("-", 0)
            access.info(
                '%s "%s %s" %d %.1fms id=%s', client[0], scope["method"], scope["path"][:200], status, seconds * 1000, rid
            )
