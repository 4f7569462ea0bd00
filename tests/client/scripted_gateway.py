"""A stand-in for the gateway that answers each request from a script: for the client's retry,
Retry-After and broken-transfer paths, which a real gateway cannot be made to show on cue.

    fake = ScriptedGateway()
    base_url, stop = fake.start_in_thread()
    fake.enqueue(Reply(429, error("rate_limited", True), {"Retry-After": "1"}), Reply(body=task()))
    ... fake.requests[0].headers["idempotency-key"] ...
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web

from tests.fakes.server import Disconnect, Dropped, FakeServer, RecordedRequest, drop, record

__all__ = ["Reply", "ScriptedGateway", "error", "task"]


@dataclass(frozen=True)
class Reply:
    """One answer; `cut_after`: announce the whole body, send this many bytes, then hang up."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    content_type: str = "application/json"


def error(code: str, retryable: bool, request_id: str = "req_scripted") -> dict[str, Any]:
    return {
        "error": {
            "code": code,
            "message": f"scripted {code}",
            "retryable": retryable,
            "request_id": request_id,
            "details": [],
        }
    }


def task(task_id: str = "task_scripted", status: str = "queued", **extra: Any) -> dict[str, Any]:
    """A task envelope with the fields the gateway always sends."""
    return {
        "object": "task",
        "task_id": task_id,
        "status": status,
        "capability": "text_to_image",
        "model": "auto",
        "resolved_model": "image-model-2",
        "metadata": {},
        "input": {},
        "progress": {"percent": 0, "stage": status, "message": ""},
        "output": {},
        "warnings": [],
        "error": None,
        **extra,
    }


class ScriptedGateway(FakeServer[RecordedRequest, Reply | Disconnect]):
    thread_name = "scripted-gateway"

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._answer)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await record(request))
        reply = self._script.popleft() if self._script else Reply(500, error("unscripted", False))
        try:
            if isinstance(reply, Disconnect):
                await asyncio.sleep(reply.delay)  # the scripted delay
                drop(request)
            body = reply.body if isinstance(reply.body, bytes) else msgspec.json.encode(reply.body)
            if reply.cut_after is None:
                return web.Response(
                    status=reply.status,
                    body=body,
                    headers=dict(reply.headers),
                    content_type=reply.content_type,
                )
            response = web.StreamResponse(
                status=reply.status,
                headers={
                    **reply.headers,
                    "Content-Type": reply.content_type,
                    "Content-Length": str(len(body)),
                },
            )
            await response.prepare(request)
            await response.write(body[: reply.cut_after])
            drop(request)
        except Dropped:
            raise asyncio.CancelledError from None  # ends the handler without an answer
