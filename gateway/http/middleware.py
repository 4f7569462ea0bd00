"""The outermost layer: request id, timer, response headers, the one log line per request and
the request's metrics.

It wraps Litestar's whole ASGI handler (not a route), so routing errors pass through it too.
A WebSocket handshake is answered here with its refusal (`gateway.http.upgrades`), no handler
runs. A request whose connection ended before its answer began is logged and counted with the
status the HTTP protocol noted (`CONNECTION_ENDED`): 499 when the client closed it, with a
`client_disconnected` line of its own, never as a server error.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.auth import DUPLICATE
from gateway.http.context import SCOPE_KEY, RequestContext
from gateway.http.protocol import CLIENT_CLOSED, CONNECTION_ENDED, WEBSOCKET_HANDSHAKE
from gateway.http.ratelimit_headers import rate_limit_headers
from gateway.http.upgrades import refuse_websocket
from gateway.ids import accept_request_id
from gateway.logging import get_logger, info_line
from gateway.metrics import UNMATCHED_ROUTE, Metrics

__all__ = ["RequestContextMiddleware"]

ASGIApp = Any

_log = get_logger("gateway.access")


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        client_id = authorization = idempotency_key = host = None
        content_type = ""
        for name, value in scope["headers"]:
            if name == b"authorization":
                # Two credentials are ambiguous: refused like a malformed one.
                authorization = DUPLICATE if authorization is not None else value.decode("latin-1")
            elif name == b"content-type":
                content_type = value.decode("latin-1")
            elif name == b"x-request-id":
                client_id = value.decode("latin-1")
            elif name == b"idempotency-key":
                idempotency_key = value.decode("latin-1")
            elif name == b"host" and host is None:  # the first, as the router reads it
                host = value
        ctx = RequestContext(
            request_id=accept_request_id(client_id),
            started=time.perf_counter(),
            authorization=authorization,
            content_type=content_type,
            idempotency_key=idempotency_key,
            host=host,
        )
        scope[SCOPE_KEY] = ctx
        status = 500

        async def send_with_headers(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                ctx.response_started = time.perf_counter()
                status = message["status"]
                headers = list(message.get("headers") or ())
                headers.append((b"x-request-id", ctx.request_id.encode()))
                if ctx.rate is not None:
                    headers.extend(rate_limit_headers(ctx.rate))
                message["headers"] = headers
            await send(message)

        try:
            if WEBSOCKET_HANDSHAKE in scope:
                refusal = await refuse_websocket(scope, send_with_headers, ctx.request_id)
                ctx.error_code = refusal.code
            else:
                await self._app(scope, receive, send_with_headers)
        finally:
            elapsed = time.perf_counter() - ctx.started
            method = scope["method"]
            started = ctx.response_started
            ended = scope.get(CONNECTION_ENDED)
            if ended is not None:  # nobody got an answer: counted as the protocol says
                status, ctx.error_code = ended
                started = 0.0
                if status == CLIENT_CLOSED:
                    _log.info(
                        "client_disconnected",
                        request_id=ctx.request_id,
                        method=method,
                        route=scope["path"],
                        tenant=ctx.tenant,
                    )
            info_line(
                _log,
                "request",
                {
                    "request_id": ctx.request_id,
                    "method": method,
                    "route": scope["path"],
                    "status": status,
                    "tenant": ctx.tenant,
                    "model": ctx.model,
                    "routing": ctx.routing,
                    "error": ctx.error_code,
                    "replayed": ctx.replayed or None,
                    "dialect": ctx.dialect,
                    "dropped_tools": ctx.dropped_tools,
                    "dropped_fields": ctx.dropped_fields,
                    "latency_ms": round(elapsed * 1000, 3),
                    "upstream_ms": round(ctx.upstream_seconds * 1000, 3)
                    if ctx.upstream_seconds
                    else None,
                },
            )
            self._metrics.request(
                scope.get("path_template") or UNMATCHED_ROUTE,
                method,
                status,
                ctx.model or "",
                elapsed,
                started - ctx.started - ctx.upstream_seconds if started else None,
                ctx.error_code,
                ctx.replayed,
            )
            if ctx.dialect is not None:
                self._metrics.dialect_request(
                    ctx.dialect, scope.get("path_template") or UNMATCHED_ROUTE, status
                )
