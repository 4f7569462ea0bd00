"""What a chat call comes to, for whoever asked: the api layer renders each as HTTP.

Every outcome carries what the answer and its log line report: the model that answered, how
it was routed (`route`: `pinned`, `auto; picked=ID`, or what failed before it, see
`gateway.routing.fallback`) and the caller's rate-limit state after admission. A refusal or a
failure is an exception instead (`gateway.errors`), carrying the same when the call got that
far.

A kept reply (`StoredReply`, replayed for a repeated Idempotency-Key) is the whole answer as
sent, so it keeps the model and route under `MODEL_HEADER` and `ROUTE_HEADER`, the names the
api layer sends them under.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import msgspec

from gateway.store.base import RateState, StoredReply

__all__ = [
    "MAX_TOKENS_HEADER",
    "MODEL_HEADER",
    "ROUTE_HEADER",
    "ChatCompleted",
    "ChatEvents",
    "ChatOutcome",
    "ChatReplayed",
    "ChatStreaming",
    "reply_headers",
]

MODEL_HEADER = "x-gateway-model"
ROUTE_HEADER = "x-gateway-route"
MAX_TOKENS_HEADER = "x-gateway-max-tokens"
"""The output limit the upstream was asked for, on an answer whose limit the gateway lowered
below the client's (to what its wallet pays for, or to the model's limit on Messages)."""


def reply_headers(model: str, route: str, max_tokens: int | None) -> dict[str, str]:
    """The headers a kept reply keeps, under the names the api layer sends them."""
    headers = {MODEL_HEADER: model, ROUTE_HEADER: route}
    if max_tokens is not None:
        headers[MAX_TOKENS_HEADER] = str(max_tokens)
    return headers


class ChatEvents(Protocol):
    """A streamed answer: its Server-Sent Events as bytes, and the ways to end it early.

    `events()` yields the frames (several joined when they arrived together; `b""` for "send
    the head now", before it waits on the upstream with nothing else yielded) and settles the
    call before its last ones; whoever sends them calls `client_left()` when the client went
    away (the upstream request is closed, what was produced is settled) and `close()` when
    done, whatever happened (closing twice is fine).
    """

    @property
    def gone(self) -> bool:
        """True once the client left: frames still yielded are not sent."""
        ...

    @property
    def ended(self) -> bool:
        """True when the frame just yielded is the stream's last (its `[DONE]`, or its error
        event): the sender ends the body with it, in the same write."""
        ...

    def events(self) -> AsyncIterator[bytes]: ...
    async def client_left(self) -> None: ...
    async def close(self) -> None: ...


class ChatCompleted(msgspec.Struct, kw_only=True, frozen=True):
    """A whole chat.completion: `body` is its JSON, already charged."""

    body: bytes
    model: str
    route: str
    rate: RateState
    upstream_seconds: float = 0.0
    """Time spent waiting for upstreams (every attempt), for the overhead metric."""
    max_tokens: int | None = None
    """The lowered output limit the answering upstream was sent (`MAX_TOKENS_HEADER`)."""
    dropped: tuple[str, ...] = ()
    """Request fields the answering upstream was sent the call without (`NativeRequest`)."""


class ChatReplayed(msgspec.Struct, kw_only=True, frozen=True):
    """A repeated Idempotency-Key: the first call's reply, as it was kept (JSON or SSE bytes)."""

    reply: StoredReply
    model: str
    route: str | None
    rate: RateState


class ChatStreaming(msgspec.Struct, kw_only=True, frozen=True):
    """A stream whose first chunk arrived: its events go out as the upstream sends them."""

    events: ChatEvents
    model: str
    route: str
    rate: RateState
    upstream_seconds: float = 0.0
    """Time spent waiting for upstreams up to the first chunk (every attempt)."""
    max_tokens: int | None = None
    """The lowered output limit the answering upstream was sent (`MAX_TOKENS_HEADER`)."""
    dropped: tuple[str, ...] = ()
    """Request fields the answering upstream was sent the call without (`NativeRequest`)."""


ChatOutcome = ChatCompleted | ChatReplayed | ChatStreaming
