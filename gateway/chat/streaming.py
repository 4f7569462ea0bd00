"""Streamed chat: chunks go to the client as the upstream sends them.

The first chunk is fetched before the response starts, so a failure up to there is an ordinary
JSON error. Afterwards the stream ends in one of three ways, and each settles exactly once:
- complete: settle, then the usage chunk (if asked) and `[DONE]`;
- upstream broke off: settle what was produced, then an `error` event, no `[DONE]`;
- client went away: the upstream request is closed and what was produced is settled.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import msgspec

from gateway.chat.usage import charge_for, usage_fields
from gateway.envelope import envelope_bytes
from gateway.error_mapping import as_gateway_error
from gateway.logging import get_logger
from gateway.responses import SSE
from gateway.store.base import StoredReply
from providers.base import ChatStream

if TYPE_CHECKING:
    from gateway.chat.service import ChatService, _Call

__all__ = ["ChatEventStream", "StreamJob"]

_encode = msgspec.json.Encoder().encode
_log = get_logger("gateway.chat")
_DONE = b"data: [DONE]\n\n"
_HEADERS = [
    (b"content-type", SSE),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class StreamJob:
    def __init__(self, service: ChatService, call: _Call, upstream: ChatStream) -> None:
        self._service = service
        self._call = call
        self._upstream = upstream
        self._chunks = upstream.__aiter__()
        self._first: dict[str, Any] | None = None
        self._usage_body: dict[str, Any] | None = None
        self._content_chunks = 0
        self._kept: list[bytes] | None = [] if call.claim is not None else None
        self.client_gone = False

    async def prefetch(self) -> None:
        """Raises (and the caller releases) when the upstream fails before its first chunk."""
        try:
            self._first = await self._chunks.__anext__()
        except StopAsyncIteration:
            self._first = None

    def frame(self, chunk: dict[str, Any]) -> bytes | None:
        """The SSE event for one upstream chunk, or None when it only carried usage."""
        usage = chunk.pop("usage", None)
        if isinstance(usage, dict):
            self._usage_body = usage
        choices = chunk.get("choices")
        if not choices:
            return None
        for choice in choices:
            delta = choice.get("delta")
            if delta and (delta.get("content") or delta.get("tool_calls") or delta.get("refusal")):
                self._content_chunks += 1
        chunk["id"] = self._call.completion_id
        chunk["model"] = self._call.route.model.id
        data = b"data: " + _encode(chunk) + b"\n\n"
        if self._kept is not None:
            self._kept.append(data)
        return data

    async def events(self) -> Any:
        """Yield SSE bytes as chunks arrive; settles before the final frames.

        Frames of chunks that arrived together (the upstream stream is `ready()`) are joined
        into one write; a frame is never held back waiting for the next one. Whatever fails
        once the response has started (the upstream, or the gateway itself) ends the stream
        with an error event and no `[DONE]`, charged for what was produced."""
        failure: BaseException | None = None
        batch: list[bytes] = []
        upstream = self._upstream
        try:
            if self._first is not None:
                frame = self.frame(self._first)
                if frame is not None:
                    batch.append(frame)
            if batch and not upstream.ready():
                yield b"".join(batch)
                batch = []
            async for chunk in self._chunks:
                if self.client_gone:
                    break
                frame = self.frame(chunk)
                if frame is not None:
                    batch.append(frame)
                if batch and not upstream.ready():
                    yield b"".join(batch)
                    batch = []
            if not self.client_gone:
                charge = self._charge()
                tail = [_DONE]
                if self._call.plan.include_usage:
                    tail.insert(0, b"data: " + _encode(self._usage_chunk(charge)) + b"\n\n")
                reply = None
                if self._kept is not None:
                    self._kept += tail
                    reply = StoredReply(
                        status=200, content_type=SSE.decode(), body=b"".join(self._kept)
                    )
        except Exception as exc:
            failure = exc
        if self.client_gone:
            await self._settle_partial()
            return
        if failure is not None:
            await self._settle_partial()
            error = as_gateway_error(failure)
            _log.warning("stream_broken", call_id=self._call.completion_id, error=repr(failure))
            batch.append(b"data: " + envelope_bytes(error, self._call.ctx.request_id) + b"\n\n")
            yield b"".join(batch)
            return
        await self._service.settle(self._call, charge.units, charge.tokens, reply)
        yield b"".join(batch + tail)

    def _charge(self) -> Any:
        return charge_for(
            self._call.route.price,
            self._upstream.usage,
            body_size=self._call.body_size,
            produced_chunks=self._content_chunks,
            usage_body=self._usage_body,
        )

    def _usage_chunk(self, charge: Any) -> dict[str, Any]:
        first = self._first or {}
        return {
            "id": self._call.completion_id,
            "object": "chat.completion.chunk",
            "created": first.get("created", 0),
            "model": self._call.route.model.id,
            "system_fingerprint": first.get("system_fingerprint"),
            "choices": [],
            "usage": usage_fields(
                dict(self._usage_body or {}), charge, self._call.caller.tenant.credits_per_usd
            ),
        }

    async def _settle_partial(self) -> None:
        """A stream that did not complete: charge what was produced, keep no reply."""
        try:
            charge = self._charge()
            await self._service.settle(self._call, charge.units, charge.tokens, None)
        except Exception as exc:  # a fault of the gateway's own; the hold expires by itself
            _log.error("settle_failed", call_id=self._call.completion_id, error=repr(exc))

    async def close_upstream(self) -> None:
        try:
            await self._upstream.aclose()
        except Exception as exc:
            _log.warning("upstream_close_failed", error=repr(exc))


class ChatEventStream:
    """The ASGI response of a streamed chat; watches for the client going away."""

    def __init__(self, job: StreamJob) -> None:
        self._job = job

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        job = self._job
        watcher = asyncio.create_task(self._watch(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
            async for frame in job.events():
                if job.client_gone:
                    continue
                try:
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                except OSError:
                    job.client_gone = True
                    await job.close_upstream()
            if not job.client_gone:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            await job.close_upstream()

    async def _watch(self, receive: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self._job.client_gone = True
                await self._job.close_upstream()
                return
