"""The door's bound on inference requests held at once (door.intake): past it, one is refused with 429 and Retry-After
before its body is read, what is not an inference route is never refused for load, and a place freed is taken again.
The requests are held inside by construction (an app that waits for a signal), not by racing a scheduler."""

from __future__ import annotations

import asyncio
import json

from door.intake import Intake

ROUTE = "/v1/radar"


class Held:
    """An app that holds each request until `release` is set, and counts those inside."""

    def __init__(self, inside_wanted: int):
        self.release, self.full = asyncio.Event(), asyncio.Event()
        self.inside, self.inside_wanted = 0, inside_wanted
        self.bodies: list[bytes] = []

    async def __call__(self, scope, receive, send):
        self.bodies.append((await receive())["body"])
        self.inside += 1
        if self.inside == self.inside_wanted:
            self.full.set()
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def request(app, path: str, body: bytes = b'{"text": "hi"}') -> tuple[int, dict[bytes, bytes], bytes, list[bytes]]:
    """One request through `app`: its status, headers and what of its body was read."""
    read: list[bytes] = []
    answer: dict = {}

    async def receive():
        read.append(body)
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"], answer["headers"] = message["status"], dict(message["headers"])
        else:
            answer["body"] = message.get("body", b"")

    scope = {"type": "http", "method": "POST", "path": path, "headers": [], "state": {}}
    await app(scope, receive, send)
    return answer["status"], answer["headers"], answer.get("body", b""), read


def test_past_its_bound_the_door_refuses_before_reading_the_body_and_takes_requests_again_once_answered():
    async def scenario():
        inner = Held(inside_wanted=2)
        intake = Intake(inner, {ROUTE: 1 << 20}, 1024, timeout=30.0, max_in_flight=2, retry_after=lambda: 7)
        held = [asyncio.create_task(request(intake, ROUTE)) for _ in range(2)]
        await inner.full.wait()

        # Refused at once; a door without the bound would hold it with the others (30 s: a failure, not a race).
        status, headers, body, read = await asyncio.wait_for(request(intake, ROUTE), 30)
        assert status == 429 and read == []  # refused before a byte of its body was read
        assert headers[b"retry-after"] == b"7" and headers[b"connection"] == b"close"
        assert json.loads(body)["type"] == "urn:triton-kit:problem:overloaded"

        inner.full.clear()
        inner.inside_wanted = 3  # what is not an inference route passes while the door is full
        other = asyncio.create_task(request(intake, "/health/live", b""))
        await inner.full.wait()

        inner.release.set()
        assert [(await task)[0] for task in (*held, other)] == [200, 200, 200]
        assert intake.in_flight == 0
        assert (await request(intake, ROUTE))[0] == 200

    asyncio.run(scenario())
