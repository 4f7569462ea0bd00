"""`gateway worker`: task workers as a process of their own, beside or instead of the ones in
`gateway serve` (GATEWAY_WORKERS=0 there leaves all tasks to these).

It opens the same store, providers and artifact storage as `serve`, runs `concurrency` tasks
at a time, reloads the routing file like `serve` does (SIGHUP, or a change on disk), and stops
on SIGTERM or SIGINT: tasks under way stop with it and are taken again by a worker once their
lease runs out.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from gateway.app.callbacks import open_callbacks, update_callbacks
from gateway.app.generations import Generations
from gateway.app.resources import RETIRE_SECONDS, open_artifacts, open_worker
from gateway.app.settings import Settings
from gateway.artifacts.store_url import blob_store_from_url, close_blob_store, open_blob_store
from gateway.billing.money import UNITS_PER_CREDIT
from gateway.config.live import ConfigWatcher
from gateway.config.loader import GatewayConfig
from gateway.metrics import open_metrics
from gateway.routing.breakers import Breakers
from gateway.routing.resolver import Router
from gateway.routing.secrets import Scrubber
from gateway.store import store_from_url
from gateway.store.redis import RedisStore
from gateway.store.redis.shard_count import shard_count_refusal
from gateway.tasks.retention import apply_task_retention
from providers.registry import spec_for

__all__ = ["run_worker"]


def run_worker(settings: Settings, config: GatewayConfig) -> int:
    """0 once stopped; 2 when refused before starting (one line on stderr)."""
    refusal = asyncio.run(_run(settings, config))
    if refusal is not None:
        print(f"gateway: {refusal}", file=sys.stderr)
        return 2
    print("Worker stopped.", file=sys.stderr)
    return 0


async def _run(settings: Settings, config: GatewayConfig) -> str | None:
    store = store_from_url(settings.resolved_store_url)
    apply_task_retention(store, config.file.gateway)  # the tasks this process ends
    blobs = blob_store_from_url(settings.artifacts_url, settings.resolved_artifacts_dir)
    await store.open()
    if isinstance(store, RedisStore) and (refusal := await shard_count_refusal(store)):
        await store.close()
        return refusal  # its queue in other shards than the URL's (docs/store.md)
    generations = Generations(grace_seconds=RETIRE_SECONDS)
    scrubber = Scrubber()
    try:
        await open_blob_store(blobs)
        breakers = Breakers()
        providers = _providers(config)
        router = Router(config, providers, breakers=breakers, scrubber=scrubber)
        generations.add(providers, router)
        # A worker serves no /metrics: its values reach a gateway's scrape only through the
        # multiprocess folder the two share on one host.
        shared = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        metrics, _ = open_metrics(
            settings.metrics and bool(shared), units_per_credit=UNITS_PER_CREDIT
        )
        artifacts = open_artifacts(settings, config, store, blobs, metrics)
        worker = open_worker(settings, config, store, router, artifacts, metrics)
        callbacks = open_callbacks(config, store, artifacts, metrics, enabled=settings.workers > 0)

        async def apply(new: GatewayConfig) -> None:
            # Tasks under way finish with the providers they started with: those close once
            # the last of them ends (`Generations`).
            providers = _providers(new)
            router = Router(new, providers, breakers=breakers, scrubber=scrubber)
            generations.add(providers, router)
            artifacts = open_artifacts(settings, new, store, blobs, metrics)
            apply_task_retention(store, new.file.gateway)
            worker.use(router, artifacts, new.file.gateway)
            update_callbacks(callbacks, new, artifacts)

        watcher = ConfigWatcher(config, apply, poll_seconds=settings.config_poll_seconds)
        print(
            f"Worker {worker.worker_id}: {settings.workers} at a time, "
            f"store {settings.resolved_store_url}"
            + (f", metrics in {shared}" if metrics.enabled else ""),
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        worker.start()
        callbacks.start()
        watcher.start()
        await stop.wait()
        await watcher.close()
        await worker.close()
        await callbacks.close()
    finally:
        await generations.close()
        await close_blob_store(blobs)
        await store.close()
    return None


def _providers(config: GatewayConfig) -> dict[str, Any]:
    return {
        name: spec_for(entry.kind).create(name, entry.options)
        for name, entry in config.providers.items()
    }
