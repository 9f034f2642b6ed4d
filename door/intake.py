"""Bodies are read whole by the door, within a size and a time, before any route sees them, and only as many
inference requests at once as the door will hold.

A request to an inference route past `max_in_flight` of them is refused with 429 (overloaded, with Retry-After)
before its body is read: what a flood of thousands of requests at once can make the door allocate is bounded, and
the allocators keep each flood's mark (docs/RELIABILITY.md), so the door's memory is bounded too. A declared
Content-Length over the route's cap is refused before a byte is read; a chunked body is
counted as it arrives and refused once it passes the cap; a body that has not arrived in full within
`timeout` seconds (a slow drip) is refused then. The app gets the complete body in one message, so
whatever reaches Triton was built from a body the door has read and checked. Starlette's own
RequestBodyLimitMiddleware has no time limit and answers a declared oversize with its own plain-text
413, hence this small one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from door.problems import Problem, problem_response

CLOSE = {"Connection": "close"}  # the rest of a refused body is never read: the connection cannot be reused


class Intake:
    """ASGI middleware. `caps`: body limit in bytes by path (the inference routes); `default_cap` for any other path.
    `max_in_flight`: inference requests held at once; `retry_after` says when a refused one may come back."""

    def __init__(
        self, app, caps: dict[str, int], default_cap: int, timeout: float, max_in_flight: int, retry_after: Callable[[], int]
    ):
        self.app, self.caps, self.default_cap, self.timeout = app, caps, default_cap, timeout
        self.max_in_flight, self.retry_after = max_in_flight, retry_after
        self.in_flight = 0  # inference requests from their first byte read to their answer; the event loop's alone

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] not in self.caps:  # health, metrics, documents: never refused for load
            return await self.take(scope, receive, send, self.default_cap)
        if self.in_flight >= self.max_in_flight:
            detail = f"the door holds {self.max_in_flight} requests at once, its limit (--max-in-flight)"
            problem = Problem(429, "overloaded", detail, {"Retry-After": str(self.retry_after()), **CLOSE})
            return await problem_response(problem, scope)(scope, receive, send)
        self.in_flight += 1
        try:
            return await self.take(scope, receive, send, self.caps[scope["path"]])
        finally:
            self.in_flight -= 1

    async def take(self, scope, receive, send, cap: int):
        """The request's body read whole, then the app with it; a problem where the body does not arrive whole."""
        try:
            body = await self.read(scope, receive, cap)
        except Problem as problem:
            return await problem_response(problem, scope)(scope, receive, send)
        if body is None:  # the client left before sending its body: nobody to answer
            return None
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)

    async def read(self, scope, receive, cap: int) -> bytes | None:
        declared = content_length(scope)
        if declared is not None and declared > cap:
            raise Problem(413, "body-too-large", f"the body is {declared} bytes; {scope['path']} takes at most {cap}", CLOSE)
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > cap:
                        raise Problem(413, "body-too-large", f"the body is over {cap} bytes, the limit of {scope['path']}", CLOSE)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise Problem(408, "body-timeout", f"the body did not arrive in full within {self.timeout:g} s", CLOSE) from None


def content_length(scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                raise Problem(400, "malformed-body", "Content-Length is not a number", CLOSE) from None
    return None
