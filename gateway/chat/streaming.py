"""Streamed chat: chunks become Server-Sent Events as the upstream sends them.

The first chunk is fetched before the outcome is returned, so a failure up to there is an
ordinary error (or, when the upstream is at fault, a fallback to the next route). Afterwards
the stream ends in one of three ways, and each settles exactly once:
- complete: settle, then the usage chunk (if asked) and `[DONE]`;
- upstream broke off: settle what was produced, then an `error` event, no `[DONE]` (and the
  upstream's breaker hears of it);
- client went away: the upstream request is closed and what was produced is settled.

The events are framed here (by a `StreamFramer` made for this stream from the client's dialect)
because an idempotent stream keeps them as its reply (replayed as is). A stream in the service's
format (chat.completion.chunks) is read here: its usage, its output chunks, the gateway's id and
model; a stream in the client's own dialect (`native`) goes to its framer as it came, and its
usage is what its upstream reported. Sending them, and
noticing the client leave, is the edge's (`gateway.http.event_stream`). What the stream needs of
the service (settling, the breakers' news) is `StreamOwner`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any, Protocol

from gateway.billing.pricing import ChatPrice
from gateway.chat.framing import StreamFramer
from gateway.chat.legacy_functions import to_legacy_chunk
from gateway.chat.outcomes import reply_headers
from gateway.chat.plan import ChatPlan
from gateway.chat.usage import Charge, Delivered, charge_for, output_limit, usage_fields
from gateway.logging import get_logger
from gateway.routing.leases import Lease
from gateway.routing.resolver import Route
from gateway.routing.upstream_errors import as_gateway_error
from gateway.store.base import Call, StoredReply
from providers.base import ChatStream

__all__ = ["StreamJob", "StreamOwner"]

_log = get_logger("gateway.chat")


def _nothing_ready() -> None:
    """`next_ready` of a stream that has none: every chunk is taken with an await."""
    return None


class StreamOwner(Protocol):
    """What a stream reports to the service that started it (`ChatService`)."""

    async def settle(
        self,
        call: Call,
        route: Route,
        charge: Charge,
        reply: StoredReply | None,
        *,
        hold_units: int,
    ) -> None: ...
    def stream_ended(self, route: Route, chunks: int) -> None: ...
    def stream_broken(self, route: Route, exc: BaseException) -> None: ...


class StreamJob:
    """One streamed call (`gateway.chat.outcomes.ChatEvents`): frames, settles, closes."""

    def __init__(
        self,
        service: StreamOwner,
        framer: StreamFramer,
        call: Call,
        route: Route,
        plan: ChatPlan,
        price: ChatPrice,
        credits_per_usd: Decimal,
        body_size: int,
        upstream: ChatStream,
        note: str,
        *,
        native: bool = False,
    ) -> None:
        self._service = service
        self._framer = framer
        self._call = call
        self._route = route
        self._plan = plan
        self._price = price
        self.note = note
        """How the call was routed (`x-gateway-route`), kept with an idempotent reply."""
        self.max_tokens = plan.lowered_for(route)
        """The lowered output limit the upstream was sent (`x-gateway-max-tokens`), or None."""
        self._credits_per_usd = credits_per_usd
        self._body_size = body_size
        self._upstream = upstream
        self._chunks = upstream.__aiter__()
        self._first: dict[str, Any] | None = None
        self._usage_body: dict[str, Any] | None = None
        self._content_chunks = 0
        self._delivered = Delivered()  # what the output is counted from when not reported
        self._kept: list[bytes] | None = [] if call.idempotency is not None else None
        self.gone = False
        self.ended = False
        """Set before the last frame is yielded (`ChatEvents.ended`)."""
        self._native = native
        """Chunks are the client's dialect's own events (framed by `_frame_native`)."""
        self._lease: Lease | None = None

    def keep(self, lease: Lease) -> None:
        """Hold `lease` (on the route's providers) until the stream is closed."""
        self._lease = lease

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
            counted = type(delta) is dict and self._delivered.add_delta(delta)
            if counted and (
                delta.get("content") or delta.get("tool_calls") or delta.get("refusal")
            ):
                self._content_chunks += 1
        chunk["id"] = self._call.call_id
        chunk["model"] = self._route.model.id
        if self._plan.legacy_answer:
            to_legacy_chunk(chunk)
        data = self._framer.chunk(chunk)
        if data is not None and self._kept is not None:
            self._kept.append(data)
        return data

    def _frame_native(self, event: dict[str, Any]) -> bytes | None:
        """A native event as its framer sends it (each one framed counts as a chunk)."""
        data = self._framer.chunk(event)
        if data is not None:
            self._content_chunks += 1
            self._delivered.chunks += 1
            if self._kept is not None:
                self._kept.append(data)
        return data

    async def events(self) -> AsyncIterator[bytes]:
        """Yield SSE bytes as chunks arrive; settles before the final frames.

        Frames of chunks that arrived together (the upstream stream is `ready()`) are joined
        into one write; a frame is never held back waiting for the next one. Before the first
        wait on the upstream something is always yielded (`b""` when no frame is ready), so
        the head goes out then; a stream that arrived whole yields once, after settling.
        Whatever fails once the response has started (the upstream, or the gateway itself)
        ends the stream with an error event and no `[DONE]`, charged for what was produced."""
        failure: BaseException | None = None
        batch: list[bytes] = []
        upstream = self._upstream
        frame_of = self._frame_native if self._native else self.frame
        try:
            opening = getattr(self._framer, "opening_usage", None)
            if opening is not None:  # a framer that reports the prompt's counts at the start
                opening(upstream.usage)
            if self._first is not None:
                frame = frame_of(self._first)
                if frame is not None:
                    batch.append(frame)
            said = False  # nothing yielded yet: the sender holds the head until something is
            if not upstream.ready():
                said = True
                yield b"".join(batch)
                batch = []
            take = getattr(upstream, "next_ready", _nothing_ready)
            async for awaited in self._chunks:
                if self.gone:
                    break
                chunk: dict[str, Any] | None = awaited
                while chunk is not None:  # this one, then those already in memory
                    frame = frame_of(chunk)
                    if frame is not None:
                        batch.append(frame)
                    chunk = take()
                if (batch or not said) and not upstream.ready():
                    said = True
                    yield b"".join(batch)
                    batch = []
            if not self.gone:
                charge = self._charge(complete=True)
                framer = self._framer
                tail = [framer.end(self._usage_chunk(charge) if framer.wants_usage else None)]
                reply = None
                if self._kept is not None:
                    self._kept += tail
                    reply = StoredReply(
                        status=200,
                        content_type=self._framer.content_type,
                        body=b"".join(self._kept),
                        headers=reply_headers(self._route.model.id, self.note, self.max_tokens),
                    )
        except Exception as exc:
            self._route.scrub(exc)  # before it is logged or shown: it may quote a credential
            failure = exc
        if self.gone:
            await self._settle_partial()
            return
        if failure is not None:
            self._service.stream_broken(self._route, failure)
            await self._settle_partial()
            error = as_gateway_error(failure)
            _log.warning("stream_broken", call_id=self._call.call_id, error=repr(failure))
            batch.append(self._framer.error(error, self._call.request_id))
            self.ended = True
            yield b"".join(batch)
            return
        await self._service.settle(
            self._call, self._route, charge, reply, hold_units=self._plan.held_units
        )
        self._service.stream_ended(self._route, self._content_chunks)
        self.ended = True
        yield b"".join(batch + tail)

    def _charge(self, *, complete: bool) -> Charge:
        return charge_for(
            self._price,
            self._upstream.usage,
            body_size=self._body_size,
            delivered=self._delivered,
            complete=complete,
            limit=output_limit(self._plan, self._route),
            usage_body=self._usage_body,
        )

    def _usage_chunk(self, charge: Charge) -> dict[str, Any]:
        first = self._first or {}
        return {
            "id": self._call.call_id,
            "object": "chat.completion.chunk",
            "created": first.get("created", 0),
            "model": self._route.model.id,
            "system_fingerprint": first.get("system_fingerprint"),
            "choices": [],
            "usage": usage_fields(dict(self._usage_body or {}), charge, self._credits_per_usd),
        }

    async def _settle_partial(self) -> None:
        """A stream that did not complete: charge what was produced, keep no reply."""
        self._service.stream_ended(self._route, self._content_chunks)
        try:
            await self._service.settle(
                self._call,
                self._route,
                self._charge(complete=False),
                None,
                hold_units=self._plan.held_units,
            )
        except Exception as exc:  # a fault of the gateway's own; the hold expires by itself
            _log.error("settle_failed", call_id=self._call.call_id, error=repr(exc))

    async def client_left(self) -> None:
        """The client went away: stop, close the upstream request, settle what was produced."""
        self.gone = True
        await self.close()

    async def close(self) -> None:
        """Close the upstream request (again is fine), and let the providers go."""
        try:
            await self._upstream.aclose()
        except Exception as exc:
            _log.warning("upstream_close_failed", error=repr(exc))
        finally:
            if self._lease is not None:
                self._lease.release()
