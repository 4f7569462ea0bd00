"""Prometheus metrics: the instruments services call, and the `/metrics` exposition."""

from gateway.metrics.exposition import CONTENT_TYPE, LiveFacts, MetricsExporter, open_metrics
from gateway.metrics.instruments import UNMATCHED_ROUTE, DisabledMetrics, Metrics

__all__ = [
    "CONTENT_TYPE",
    "UNMATCHED_ROUTE",
    "DisabledMetrics",
    "LiveFacts",
    "Metrics",
    "MetricsExporter",
    "open_metrics",
]
