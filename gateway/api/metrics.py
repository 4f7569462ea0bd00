"""GET /metrics: Prometheus text format, no key (scrapers reach it on the network they share
with the gateway; keep it off the public listener in front). 404 when GATEWAY_METRICS=off.
HEAD answers the same status and content type without rendering anything (probes use it)."""

from __future__ import annotations

from typing import Any

from litestar import Request, get, route
from litestar.response import Response

from gateway.api.resources import Resources
from gateway.errors import NotFound
from gateway.metrics import CONTENT_TYPE, LiveFacts, MetricsExporter
from gateway.metrics.exposition import ShardFacts, read_queue_depth

__all__ = ["HANDLERS", "metrics", "metrics_head"]

_SHARDS_READ_SECONDS = 0.25


@get("/metrics", include_in_schema=False)
async def metrics(request: Request[Any, Any, Any], resources: Resources) -> Response[bytes]:
    exporter: MetricsExporter | None = request.app.state.metrics_exporter
    if exporter is None:
        raise NotFound("Metrics are off (GATEWAY_METRICS=off).")
    facts = LiveFacts(
        config_version=resources.config.version,
        breakers=resources.router.breaker_states(),
        queue_depth=await read_queue_depth(resources.store.task_queue_depth),
        callback_backlog=await read_queue_depth(resources.store.callback_backlog),
        shards=await _shards(resources),
    )
    return Response(await exporter.render(facts), media_type=CONTENT_TYPE)


async def _shards(resources: Resources) -> list[ShardFacts]:
    """Each shard's replication, as fresh as the store can tell within a quarter second."""
    states = await resources.store.durability(_SHARDS_READ_SECONDS)
    return [ShardFacts(s.shard, s.replicas, s.reduced) for s in states]


@route("/metrics", http_method=["HEAD"], include_in_schema=False)
async def metrics_head(request: Request[Any, Any, Any]) -> Response[bytes]:
    if request.app.state.metrics_exporter is None:
        raise NotFound("Metrics are off (GATEWAY_METRICS=off).")
    return Response(b"", media_type=CONTENT_TYPE)


HANDLERS = [metrics, metrics_head]
