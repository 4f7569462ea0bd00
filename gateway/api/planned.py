"""Planned capabilities: known paths that answer 501 with their release label.

Not in the OpenAPI document: the spec's public description lists only callable endpoints."""

from __future__ import annotations

from typing import Any

from litestar import Request, route

from gateway.errors import NotImplementedYet
from gateway.schemas.planned import PLANNED_PATHS, planned_feature

__all__ = ["HANDLERS", "planned"]


@route(
    list(PLANNED_PATHS),
    http_method=["GET", "POST", "PUT", "PATCH", "DELETE"],
    include_in_schema=False,
)
async def planned(request: Request[Any, Any, Any]) -> None:
    feature = planned_feature(request.url.path) or "this capability"
    raise NotImplementedYet(f"The {feature} API is Planned and not callable yet.")


HANDLERS = [planned]
