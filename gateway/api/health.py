"""GET /v1/health: no authentication; 503 `degraded` when the store does not answer in time.

Both answers name the routing file's version in force (`config_version`, its checksum)."""

from __future__ import annotations

from typing import Any

from litestar import get
from litestar.response import Response

from gateway.resources import Resources

__all__ = ["HANDLERS", "health"]


@get("/v1/health")
async def health(resources: Resources) -> Response[dict[str, Any]]:
    version = resources.config.version
    if await resources.health.store_answers():
        return Response({"status": "ok", "config_version": version}, status_code=200)
    return Response(
        {"status": "degraded", "store": "unavailable", "config_version": version},
        status_code=503,
    )


HANDLERS = [health]
