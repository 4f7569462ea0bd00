"""A fake OpenAI Responses API upstream (`POST /v1/responses`), over real HTTP: it records each
request and answers with the scripted reply, else a whole response (or its stream) saying
`DEFAULT_TEXT`; at Azure OpenAI's paths too. A stream's events are written as OpenAI writes them
(`event: <type>` and `data: <json>`), as the scripted bytes when given."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from tests.fakes.server import Disconnect, FakeServer, RecordedRequest, drop, record

__all__ = [
    "DEFAULT_TEXT",
    "FakeOpenAIResponses",
    "ResponsesReply",
    "ResponsesStreamReply",
    "event_bytes",
    "whole_response",
]

DEFAULT_TEXT = "Hello from the fake Responses upstream."


def whole_response(model: str, text: str = DEFAULT_TEXT) -> dict[str, Any]:
    return {
        "id": "resp_fake0001",
        "object": "response",
        "created_at": 1741487325,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": [
            {
                "id": "msg_fake0001",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 8,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 18,
        },
    }


def event_bytes(event: Mapping[str, Any]) -> bytes:
    return (
        b"event: "
        + str(event["type"]).encode()
        + b"\ndata: "
        + msgspec.json.encode(event)
        + b"\n\n"
    )


@dataclass(frozen=True)
class ResponsesReply:
    body: Mapping[str, Any] | None = None  # None: a whole response saying DEFAULT_TEXT
    status: int = 200


@dataclass(frozen=True)
class ResponsesStreamReply:
    events: Sequence[Mapping[str, Any]] | None = None
    raw: bytes | None = None  # the body as is (instead of `events`)
    break_after: int | None = None  # close the connection after this many events


class FakeOpenAIResponses(
    FakeServer[RecordedRequest, ResponsesReply | ResponsesStreamReply | Disconnect]
):
    base_path = "/v1"
    thread_name = "fake-openai-responses"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/openai/v1/responses", self._responses)  # Azure's v1 API
        app.router.add_post("/openai/responses", self._responses)  # Azure's dated API

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        recorded = await record(request)
        self.requests.append(recorded)
        wants: Mapping[str, Any] = recorded.json or {}
        reply = self._script.popleft() if self._script else None
        if isinstance(reply, Disconnect):
            await asyncio.sleep(reply.delay)
            drop(request)
        if reply is None:
            reply = ResponsesStreamReply() if wants.get("stream") else ResponsesReply()
        if isinstance(reply, ResponsesReply):
            body = reply.body or whole_response(str(wants.get("model")))
            return web.json_response(body, status=reply.status)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if reply.raw is not None:
            await response.write(reply.raw)
        else:
            events = reply.events or _events_of(whole_response(str(wants.get("model"))))
            for index, event in enumerate(events):
                if reply.break_after is not None and index >= reply.break_after:
                    drop(request)
                await response.write(event_bytes(event))
        await response.write_eof()
        return response


def _events_of(whole: Mapping[str, Any]) -> list[dict[str, Any]]:
    started = {**whole, "status": "in_progress", "output": [], "usage": None}
    message = whole["output"][0]
    text = message["content"][0]["text"]
    at = {"item_id": message["id"], "output_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**message, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            **at,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
    ]
    for word in text.split(" "):
        events.append(
            {
                "type": "response.output_text.delta",
                **at,
                "content_index": 0,
                "delta": word + " ",
                "logprobs": [],
            }
        )
    events += [
        {
            "type": "response.output_text.done",
            **at,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            **at,
            "content_index": 0,
            "part": message["content"][0],
        },
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {"type": "response.completed", "response": dict(whole)},
    ]
    return [{**event, "sequence_number": number} for number, event in enumerate(events)]
