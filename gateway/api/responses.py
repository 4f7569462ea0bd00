"""Bytes sent straight to ASGI: the chat path skips the framework's response machinery."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.chat.outcomes import MAX_TOKENS_HEADER, MODEL_HEADER, ROUTE_HEADER
from gateway.store.base import StoredReply

__all__ = ["JSON", "route_headers", "send_bytes", "send_reply"]

JSON = b"application/json"
_JSON_TYPE = (b"content-type", JSON)
_REPLAYED = (b"idempotent-replayed", b"true")
_MODEL = MODEL_HEADER.encode()
_ROUTE = ROUTE_HEADER.encode()
_MAX_TOKENS = MAX_TOKENS_HEADER.encode()


def route_headers(
    model: str, route: str, max_tokens: int | None = None
) -> list[tuple[bytes, bytes]]:
    """`x-gateway-model` (the model that answered), `x-gateway-route` (how it was routed) and,
    when the gateway lowered the output limit, `x-gateway-max-tokens` (what it was sent)."""
    headers = [(_MODEL, model.encode()), (_ROUTE, route.encode())]
    if max_tokens is not None:
        headers.append((_MAX_TOKENS, str(max_tokens).encode()))
    return headers


async def send_bytes(send: Any, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """A 200 JSON response whose body is `body`, with `extra` headers."""
    headers = [_JSON_TYPE, (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_reply(
    send: Any, reply: StoredReply, extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """A kept reply, replayed as it was (JSON, or a whole SSE stream), marked as a replay."""
    body = reply.body
    headers = [
        (b"content-type", reply.content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        _REPLAYED,
        *extra,
    ]
    headers += [(k.encode(), v.encode()) for k, v in reply.headers.items()]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
