"""GET /v1/health: no authentication; 503 `degraded` when the store does not answer in time
(`store: unavailable`), or when a shard of it writes money less durably than configured
(`store: durability_reduced`, the shards named: a cluster master without the replicas its money
writes wait for, docs/store.md "Failover"); the gateway still serves then.

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
    """The store did not answer a ping in time, or some of its shards write money with fewer
    replicas than configured."""

    status: Literal["degraded"]
    store: Literal["unavailable", "durability_reduced"]
    shards: list[str] = msgspec.field(default_factory=list)
    """With `durability_reduced`: the shards (a cluster master's `host:port`, Sentinel's
    service) whose money writes rest on fewer replicas (or on their own AOF)."""
    config_version: str


_DOC = OperationDoc(
    summary="Health of the gateway and its store",
    tag="Health",
    release="Available",
    auth="none",
    rate_limited=False,
    responses={200: HealthOk, 503: HealthDegraded},
    description=(
        "Needs no key. Answers within about 250 ms whatever the store does. Degraded while the "
        "store does not answer, or while a shard writes money with fewer replicas than "
        "configured (the gateway serves meanwhile)."
    ),
)


@get("/v1/health", opt=documented(_DOC))
async def health(resources: Resources) -> Response[dict[str, Any]]:
    version = resources.config.version
    state = await resources.health.state()
    if not state.answers:
        return Response(
            {"status": "degraded", "store": "unavailable", "config_version": version},
            status_code=503,
        )
    if state.reduced:
        return Response(
            {
                "status": "degraded",
                "store": "durability_reduced",
                "shards": list(state.reduced),
                "config_version": version,
            },
            status_code=503,
        )
    return Response({"status": "ok", "config_version": version}, status_code=200)


HANDLERS = [health]
