"""Bodies are read whole by the door, within a size and a time, before any route sees them.

A declared Content-Length over the route's cap is refused before a byte is read; a chunked body is
counted as it arrives and refused once it passes the cap; a body that has not arrived in full within
`timeout` seconds (a slow drip) is refused then. The app gets the complete body in one message, so
whatever reaches Triton was built from a body the door has read and checked. Starlette's own
RequestBodyLimitMiddleware has no time limit and answers a declared oversize with its own plain-text
413, hence this small one.
"""

from __future__ import annotations

import asyncio

from door.problems import Problem, problem_response

CLOSE = {"Connection": "close"}  # the rest of a refused body is never read: the connection cannot be reused


class Intake:
    """ASGI middleware. `caps`: body limit in bytes by path; `default_cap` for any other path."""

    def __init__(self, app, caps: dict[str, int], default_cap: int, timeout: float):
        self.app, self.caps, self.default_cap, self.timeout = app, caps, default_cap, timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        cap = self.caps.get(scope["path"], self.default_cap)
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
