"""A bytes response sent straight to ASGI: the hot path skips the framework's serializers."""

from __future__ import annotations

from typing import Any

__all__ = ["JSON", "SSE", "RawResponse"]

JSON = b"application/json"
SSE = b"text/event-stream; charset=utf-8"


class RawResponse:
    __slots__ = ("body", "headers", "status")

    def __init__(
        self,
        body: bytes,
        *,
        status: int = 200,
        content_type: bytes = JSON,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        self.body = body
        self.status = status
        self.headers = [
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
            *(headers or ()),
        ]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})
