"""WebSocket handshakes: the gateway serves no WebSocket, so each is answered in the envelope.

The HTTP protocol never upgrades a connection (`gateway.http.protocol`); a handshake arrives as
a plain GET marked `WEBSOCKET_HANDSHAKE`, and the middleware answers it here instead of running
a handler: a Planned path (`/v1/realtime`) is 501 `not_implemented`, a path the gateway does
not know 404 `not_found`, and any other 400 `invalid_request`. Always with `Connection: close`:
the client meant to speak another protocol on it.
"""

from __future__ import annotations

from typing import Any

from litestar.exceptions import MethodNotAllowedException, NotFoundException
from litestar.utils import normalize_path

from gateway.errors import GatewayError, InvalidRequest, NotFound, NotImplementedYet
from gateway.http.envelope import envelope_bytes
from gateway.schemas.planned import planned_feature

__all__ = ["refuse_websocket", "websocket_refusal"]


def websocket_refusal(scope: Any) -> GatewayError:
    """Why the handshake in `scope` is refused; notes the route template when there is one."""
    path = scope["path"]
    feature = planned_feature(path)
    if feature is not None:
        return NotImplementedYet(f"The {feature} API is Planned and not callable yet.")
    try:
        *_, template = scope["app"].asgi_router.handle_routing(
            path=normalize_path(path), method="GET"
        )
    except NotFoundException:
        return NotFound("No such endpoint.")
    except MethodNotAllowedException:
        pass  # a path of other methods: it exists
    else:
        scope["path_template"] = template
    return InvalidRequest(
        "The gateway accepts no WebSocket connections; send this request as plain HTTP."
    )


async def refuse_websocket(scope: Any, send: Any, request_id: str) -> GatewayError:
    """Answer the handshake in `scope` with its refusal; returns the refusal."""
    error = websocket_refusal(scope)
    body = envelope_bytes(error, request_id)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        (b"connection", b"close"),
        *((name.lower().encode(), value.encode()) for name, value in error.headers.items()),
    ]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
    return error
