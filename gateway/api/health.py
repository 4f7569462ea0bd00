"""GET /v1/health: no authentication; 503 when the store does not answer."""

from __future__ import annotations

from typing import Any

from litestar import get
from litestar.response import Response

from gateway.resources import Resources

__all__ = ["HANDLERS", "health"]


@get("/v1/health")
async def health(resources: Resources) -> Response[dict[str, Any]]:
    if await resources.store.ping():
        return Response({"status": "ok"}, status_code=200)
    return Response({"status": "degraded", "store": "unavailable"}, status_code=503)


HANDLERS = [health]
