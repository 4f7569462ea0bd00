"""`GET /metrics`: the instruments' values plus what is read live at scrape time.

Live facts are the state of things, not events: the loaded routing file's version, each
upstream's circuit breaker, the task queue's depth, whether the store answers and, per shard of
a store that waits for replicas, how many keep up and whether that is fewer than configured.
They are read when Prometheus asks (bounded store calls), so they cost nothing per request.

Beside them, the standard process metrics of prometheus-client's `ProcessCollector` and
`PlatformCollector` (`process_resident_memory_bytes`, `process_cpu_seconds_total`,
`process_open_fds`, `process_start_time_seconds`, ..., `python_info`), read at scrape time.

In multiprocess mode (`PROMETHEUS_MULTIPROC_DIR`), the instruments' values are summed from every
process's files in that folder, and each serving process also writes its routing file's
version, its breakers and its process metrics there (`gateway.metrics.process_facts`, one series
per process, labelled `pid`); the store's facts (queue depth, store up) and `python_info` are
read by the answering process. A `gateway worker` publishes none of them: its memory and CPU are
not in the scrape.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from gateway.metrics.instruments import DisabledMetrics, Metrics
from gateway.metrics.process_facts import BREAKER_HELP, BREAKER_STATES, CONFIG_HELP, ProcessFacts

__all__ = [
    "CONTENT_TYPE",
    "LiveFacts",
    "MetricsExporter",
    "ShardFacts",
    "open_metrics",
    "read_queue_depth",
]

CONTENT_TYPE = "text/plain; version=0.0.4"
"""Prometheus's text format, which every Prometheus reads (the charset is added on sending)."""
_QUEUE_READ_SECONDS = 0.25


@dataclass(frozen=True, slots=True)
class ShardFacts:
    """One shard of the store: a cluster master (`host:port`) or Sentinel's service."""

    shard: str
    replicas: int | None
    """Replicas keeping up with it (None: not known)."""
    reduced: bool
    """Fewer than its money writes should wait for (`wait_replicas`)."""


@dataclass(frozen=True, slots=True)
class LiveFacts:
    config_version: str
    breakers: Mapping[str, str]
    """Provider name -> `closed`, `half_open` or `open`."""
    queue_depth: int | None
    """None when the store did not answer in time."""
    callback_backlog: int | None = None
    """Task callbacks scheduled and not yet delivered, failed or disabled (None: unknown)."""
    shards: Sequence[ShardFacts] = ()


class _LiveCollector:
    """The facts read at scrape time; `store_only`: the routing file's version and the
    breakers come from every process's files instead (multiprocess mode)."""

    def __init__(self, facts: LiveFacts, *, store_only: bool) -> None:
        self._facts = facts
        self._store_only = store_only

    def collect(self) -> Iterator[Metric]:
        facts = self._facts
        if not self._store_only:
            info = GaugeMetricFamily("gateway_config_info", CONFIG_HELP, labels=["version"])
            info.add_metric([facts.config_version], 1)
            yield info
            breakers = GaugeMetricFamily(
                "gateway_circuit_breaker_state", BREAKER_HELP, labels=["provider", "state"]
            )
            for provider, state in sorted(facts.breakers.items()):
                for name in BREAKER_STATES:
                    breakers.add_metric([provider, name], 1 if state == name else 0)
            yield breakers
        store_up = GaugeMetricFamily(
            "gateway_store_up", "1 when the store answered the scrape's read in time."
        )
        store_up.add_metric([], 0 if facts.queue_depth is None else 1)
        yield store_up
        if facts.queue_depth is not None:
            depth = GaugeMetricFamily(
                "gateway_task_queue_depth", "Tasks queued and not yet claimed by a worker."
            )
            depth.add_metric([], facts.queue_depth)
            yield depth
        if facts.callback_backlog is not None:
            backlog = GaugeMetricFamily(
                "gateway_callback_backlog",
                "Task callbacks waiting for their delivery (first attempt or a retry).",
            )
            backlog.add_metric([], facts.callback_backlog)
            yield backlog
        if facts.shards:
            yield from _shard_metrics(facts.shards)


def _shard_metrics(shards: Sequence[ShardFacts]) -> Iterator[Metric]:
    replicas = GaugeMetricFamily(
        "gateway_store_replicas",
        "Replicas online and acknowledging a store shard's writes (a cluster master).",
        labels=["shard"],
    )
    reduced = GaugeMetricFamily(
        "gateway_store_durability_reduced",
        "1 while a store shard has fewer replicas than its money writes wait for "
        "(they rest on the replicas it has, or on its own AOF).",
        labels=["shard"],
    )
    for shard in shards:
        if shard.replicas is not None:
            replicas.add_metric([shard.shard], shard.replicas)
        reduced.add_metric([shard.shard], 1 if shard.reduced else 0)
    yield replicas
    yield reduced


class _Sources:
    """What `generate_latest` reads: any object with `collect()` will do."""

    def __init__(self, sources: Iterable[Any]) -> None:
        self._sources = list(sources)

    def collect(self) -> Iterator[Metric]:
        for source in self._sources:
            yield from source.collect()


class MetricsExporter:
    """Renders the Prometheus text for a scrape."""

    def __init__(self, registry: CollectorRegistry | None, multiprocess_dir: str | None) -> None:
        self._registry = registry
        self._multiprocess_dir = multiprocess_dir
        self._shared = ProcessFacts(multiprocess_dir) if multiprocess_dir is not None else None
        self._process = CollectorRegistry(auto_describe=False)
        if self._shared is None:  # else each process's own, from the folder
            ProcessCollector(registry=self._process)
        PlatformCollector(registry=self._process)

    @property
    def multiprocess(self) -> bool:
        """True when the values live in `PROMETHEUS_MULTIPROC_DIR` (summed at scrape)."""
        return self._shared is not None

    def publish(self, config_version: str, breakers: Mapping[str, str]) -> None:
        """Multiprocess mode: this process's facts to the folder, for any process's scrape
        (a serving process calls it every second); nothing otherwise."""
        if self._shared is not None:
            self._shared.publish(config_version, breakers)

    def retire(self) -> None:
        """Multiprocess mode: this process stops, its facts leave the scrape."""
        if self._shared is not None:
            self._shared.retire()

    async def render(self, facts: LiveFacts) -> bytes:
        sources: list[Any] = []
        if self._multiprocess_dir is not None:
            self.publish(facts.config_version, facts.breakers)  # ours as of now
            merged = CollectorRegistry(auto_describe=False)
            MultiProcessCollector(merged, path=self._multiprocess_dir)  # type: ignore[no-untyped-call]
            sources.append(merged)
        elif self._registry is not None:
            sources.append(self._registry)
        sources.append(self._process)
        sources.append(_LiveCollector(facts, store_only=self.multiprocess))
        scrape = _Sources(sources)
        if self._multiprocess_dir is not None:  # reads a file per process: off the loop
            return await asyncio.to_thread(generate_latest, scrape)
        return generate_latest(scrape)


async def read_queue_depth(read: Any) -> int | None:
    """The store's queue depth, or None when it does not answer within a quarter second."""
    try:
        return int(await asyncio.wait_for(read(), _QUEUE_READ_SECONDS))
    except Exception:
        return None


def open_metrics(enabled: bool, *, units_per_credit: int) -> tuple[Metrics, MetricsExporter | None]:
    """The instruments and their exporter (None when metrics are off).

    Multiprocess mode follows prometheus-client's own switch, `PROMETHEUS_MULTIPROC_DIR`, which
    the library reads when it is first imported: set it in the environment, not later."""
    if not enabled:
        return DisabledMetrics(), None
    # The `_created` series double the text and Prometheus does not read them from it.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None
    if directory is not None:
        return Metrics(None, units_per_credit=units_per_credit), MetricsExporter(None, directory)
    registry = CollectorRegistry(auto_describe=False)
    metrics = Metrics(registry, units_per_credit=units_per_credit)
    return metrics, MetricsExporter(registry, None)
