"""What an operation's OpenAPI description needs beyond what Litestar reads from its handler.

Litestar sees paths, path and query parameters and returned Structs. The gateway's handlers read
their bodies themselves (one msgspec decode, the gateway's own errors), answer in the envelope
through one exception handler and add headers in the middleware, so the rest is declared next to
each handler: `@get(..., opt=documented(OperationDoc(...)))`. `gateway.api.openapi.build` turns
it into the document; a handler in the schema without one fails the build.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "OPT_KEY",
    "Auth",
    "Bodies",
    "Body",
    "Content",
    "OperationDoc",
    "Release",
    "documented",
]

OPT_KEY = "openapi"

Release = Literal["Available", "Preview"]
"""The spec's release labels of callable endpoints (Planned ones are not in the document)."""

Auth = Literal["api_key", "api_key_or_link", "admin", "none"]
"""`api_key_or_link`: the API key, or the signed query of a link the gateway handed out."""


@dataclass(frozen=True, slots=True)
class Content:
    """A body that is not one JSON Struct: `schema` is JSON Schema, as is, for `media_type`."""

    media_type: str
    schema: Mapping[str, Any]
    encoding: Mapping[str, Any] | None = None
    events: type | None = None
    """For an event stream: the Struct each `data:` event carries as JSON. `schema` then
    describes one event (`{event, data, id}`), as OpenAPI 3.2's `itemSchema` does and as
    tools read an event stream's `schema` before 3.2."""


Body = Any
"""A msgspec Struct (sent or answered as JSON; also `Annotated` with a `Meta` that adds JSON
Schema), or `Content`."""

Bodies = Body | tuple[Body, ...]
"""One body, or several of different media types (JSON or an event stream)."""


@dataclass(frozen=True, slots=True)
class OperationDoc:
    summary: str
    tag: str
    release: Release
    responses: Mapping[int, Bodies | None]
    """Success statuses and their bodies (None: no body)."""
    errors: tuple[int, ...] = ()
    """Error statuses of this operation beyond those every operation of its `auth` can answer
    (`gateway.api.openapi.build.common_errors`); each is the error envelope."""
    body: Body | None = None
    example: Mapping[str, Any] | None = None
    """A request body that succeeds (with the shipped routing file)."""
    idempotent: bool = False
    """Takes `Idempotency-Key`; a replay says `Idempotent-Replayed: true`."""
    auth: Auth = "api_key"
    rate_limited: bool = True
    """Counted against the key's requests per minute: x-ratelimit-* headers, 429."""
    description: str = ""
    query: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """JSON Schema of query parameters, replacing what Litestar infers from the signature
    (the handlers take them as strings and check them with the gateway's own messages)."""
    tokens: bool = False
    """Also counted against tokens per minute: the x-ratelimit-*-tokens headers (chat)."""
    headers: Mapping[int, Mapping[str, bool]] = field(default_factory=dict)
    """More response headers by status: name (of `gateway.api.openapi.build`'s header
    components) -> required."""
    method: str | None = None
    """The method of a raw ASGI handler, which Litestar does not know."""
    request_headers: tuple[str, ...] = ()
    """Request headers it reads beyond `X-Request-Id` (and `Idempotency-Key` when
    `idempotent`): names of `gateway.api.openapi.components.PARAMETERS`."""


def documented(doc: OperationDoc) -> dict[str, Any]:
    """The handler's `opt=`."""
    return {OPT_KEY: doc}
