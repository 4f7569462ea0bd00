"""GET /v1/health: no authentication; 503 `degraded` when the store does not answer in time.

Both answers name the routing file's version in force (`config_version`, its checksum)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from litestar import get
from litestar.response import Response

from gateway.api.openapi.doc import OperationDoc, documented
from gateway.api.resources import Resources

__all__ = ["HANDLERS", "HealthDegraded", "HealthOk", "health"]


class HealthOk(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    status: Literal["ok"]
    config_version: str
    """The routing file's checksum."""


class HealthDegraded(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The store did not answer a ping in time."""

    status: Literal["degraded"]
    store: Literal["unavailable"]
    config_version: str


_DOC = OperationDoc(
    summary="Health of the gateway and its store",
    tag="Health",
    release="Available",
    auth="none",
    rate_limited=False,
    responses={200: HealthOk, 503: HealthDegraded},
    description="Needs no key. Answers within about 250 ms whatever the store does.",
)


@get("/v1/health", opt=documented(_DOC))
async def health(resources: Resources) -> Response[dict[str, Any]]:
    version = resources.config.version
    if await resources.health.store_answers():
        return Response({"status": "ok", "config_version": version}, status_code=200)
    return Response(
        {"status": "degraded", "store": "unavailable", "config_version": version},
        status_code=503,
    )


HANDLERS = [health]
