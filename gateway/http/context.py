"""Per-request facts gathered along the way, for the response headers and the one log line.

HTTP-layer only: the middleware makes it, `gateway.api` fills it from what services return
(outcomes, or errors carrying the model and the rate state). Nothing below the api imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.errors import GatewayError
from gateway.store.base import RateState

__all__ = ["SCOPE_KEY", "ErrorRenderer", "RequestContext", "context_of"]

SCOPE_KEY = "gateway.ctx"

ErrorRenderer = Callable[[GatewayError, str], tuple[int, bytes, dict[str, str]]]
"""(error, request id) -> status, body and headers: a client dialect's own error shape."""


@dataclass(slots=True)
class RequestContext:
    """Also carries the few request headers the gateway reads, taken in the middleware's one
    pass over them (the framework would build a whole header map per request)."""

    request_id: str
    started: float
    authorization: str | None = None
    content_type: str = ""
    idempotency_key: str | None = None
    host: bytes | None = None
    """The Host header as sent (`gateway.http.direct_routes` checks it as the router would)."""
    tenant: str | None = None
    model: str | None = None
    rate: RateState | None = None
    error_code: str | None = None
    replayed: bool = False
    routing: str | None = None
    """How the call was routed (`x-gateway-route`), when it reached an upstream."""
    upstream_seconds: float = 0.0
    """Time spent waiting for upstreams before the response started (not the gateway's)."""
    response_started: float = 0.0
    dialect: str | None = None
    """The client dialect of a chat endpoint (`openai`, `anthropic`, `responses`): a metrics
    label."""
    dropped_tools: str | None = None
    """Tools left out of a call's offer because its upstreams cannot run them (comma-separated)."""
    dropped_fields: str | None = None
    """Request fields the answering upstream was sent the call without (comma-separated)."""
    render_error: ErrorRenderer | None = None
    """Errors in the dialect's own shape (None: the gateway's envelope)."""


def context_of(scope: Any) -> RequestContext:
    ctx: RequestContext = scope[SCOPE_KEY]
    return ctx
