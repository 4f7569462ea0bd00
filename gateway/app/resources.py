"""What the app opens at start and closes at stop; handlers reach it through DI."""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

from gateway.admission.finisher import CallFinisher
from gateway.admission.gatekeeper import Gatekeeper
from gateway.api.resources import Resources
from gateway.app.callbacks import callback_policy, open_callbacks, update_callbacks
from gateway.app.generations import Generations, close_providers
from gateway.app.settings import Settings
from gateway.artifacts import BlobStore, FetchPolicy, ReferenceFetcher, UrlSigner
from gateway.artifacts.addresses import parse_networks
from gateway.artifacts.service import ArtifactService
from gateway.artifacts.store_url import blob_store_from_url, close_blob_store, open_blob_store
from gateway.auth import Authenticator
from gateway.callbacks.worker import CallbackWorker
from gateway.chat.service import ChatService
from gateway.config.loader import GatewayConfig
from gateway.embeddings.service import EmbeddingsService
from gateway.ids import new_call_id
from gateway.logging import get_logger
from gateway.metrics import Metrics
from gateway.routing.breakers import Breakers
from gateway.routing.resolver import Router
from gateway.routing.secrets import Scrubber
from gateway.store import store_from_url
from gateway.store.base import Store
from gateway.store.health import StoreHealth
from gateway.tasks.retention import apply_task_retention, sweep_tasks
from gateway.tasks.service import TaskService
from gateway.tasks.worker import Worker
from providers.registry import spec_for

__all__ = ["RETIRE_SECONDS", "Runtime", "open_artifacts", "open_resources", "open_worker"]

RETIRE_SECONDS = 600.0
"""How long a retired generation of providers stays open at least (then until unleased)."""

_log = get_logger("gateway.app.resources")


class Runtime:
    """What lives as long as the process (the store, the finisher, the worker, the sweeper) and
    builds a `Resources` for each version of the routing file (`configure`).

    A reload builds new providers, router and services around the same store; requests that
    started on the previous `Resources` finish on it, and its providers are closed once
    `retire_seconds` have passed and no call, stream or task holds a lease on them
    (`gateway.app.generations`), or at shutdown: nothing in flight loses its connection.
    One scrubber masks the credentials of every open generation's providers.
    """

    def __init__(
        self, settings: Settings, metrics: Metrics, *, retire_seconds: float = RETIRE_SECONDS
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.store = store_from_url(settings.resolved_store_url, serving=True)
        self.finisher = CallFinisher(self.store)
        self.gatekeeper = Gatekeeper(self.store)
        self.health = StoreHealth(self.store)
        self.breakers = Breakers()
        self.blobs = blob_store_from_url(settings.artifacts_url, settings.resolved_artifacts_dir)
        self.scrubber = Scrubber()
        self.generations = Generations(grace_seconds=retire_seconds)
        self._worker: Worker | None = None
        self._callbacks: CallbackWorker | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self.current: Resources | None = None

    async def open(self) -> None:
        await self.store.open()
        await open_blob_store(self.blobs)
        self.finisher.start()
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def configure(self, config: GatewayConfig) -> Resources:
        """Resources for `config`; the previous generation's providers retire later."""
        settings, store = self.settings, self.store
        providers: dict[str, Any] = {}
        try:
            for name, entry in config.providers.items():
                providers[name] = spec_for(entry.kind).create(name, entry.options)
        except BaseException:
            await close_providers(providers)
            raise
        # One breaker registry for the process: a reload keeps what it knows of each upstream.
        router = Router(config, providers, breakers=self.breakers, scrubber=self.scrubber)
        metrics = self.metrics
        apply_task_retention(store, config.file.gateway)
        artifacts = open_artifacts(settings, config, store, self.blobs, metrics)
        if self._worker is None:
            self._worker = open_worker(settings, config, store, router, artifacts, metrics)
            self._worker.start()
        else:
            self._worker.use(router, artifacts, config.file.gateway)
        if self._callbacks is None:  # (started with the task worker: GATEWAY_WORKERS=0, none)
            self._callbacks = open_callbacks(
                config, store, artifacts, metrics, enabled=settings.workers > 0
            )
            self._callbacks.start()
        else:
            update_callbacks(self._callbacks, config, artifacts)
        self.generations.add(providers, router)
        self.current = Resources(
            admin_token_hash=settings.admin_token_hash,
            config=config,
            store=store,
            providers=providers,
            router=router,
            auth=Authenticator(
                store, config, settings.resolved_key_cache_seconds, on_expired=metrics.key_expired
            ),
            gatekeeper=self.gatekeeper,
            finisher=self.finisher,
            health=self.health,
            chat=ChatService(
                self.finisher,
                router,
                self.gatekeeper,
                hold_seconds=config.file.gateway.hold_seconds,
                metrics=metrics,
            ),
            artifacts=artifacts,
            tasks=TaskService(
                store,
                router,
                artifacts,
                self.finisher,
                hold_seconds=config.file.gateway.hold_seconds,
                metrics=metrics,
                callback_policy=callback_policy(config),
            ),
            worker=self._worker,
            embeddings=EmbeddingsService(
                self.finisher,
                router,
                self.gatekeeper,
                hold_seconds=config.file.gateway.hold_seconds,
                metrics=metrics,
            ),
        )
        return self.current

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._worker is not None:
            await self._worker.close()
        if self._callbacks is not None:
            await self._callbacks.close()
        await self.finisher.close()
        await self.generations.close()
        await close_blob_store(self.blobs)
        await self.store.close()

    async def _sweep(self, every: float = 60.0) -> None:
        """Retention, at start and then once a minute: expired artifacts (and what crashed
        writes left), ended tasks past their retention (after the one-time backfill of the
        listing indexes, `gateway.tasks.retention`), and the task creates a dead gateway left
        unconfirmed once their holds expired. The store may be away: the next round catches up."""
        while True:
            current = self.current
            if current is not None:  # configured: retention and holds are the file's
                await _logged("artifact_sweep_failed", current.artifacts.sweep())
                await _logged("task_sweep_failed", sweep_tasks(self.store))
                hold_seconds = current.config.file.gateway.hold_seconds
                abandoned = await _logged(
                    "unconfirmed_sweep_failed",
                    self.store.abandon_unconfirmed(older_than=hold_seconds),
                )
                if abandoned:
                    _log.info("unconfirmed_tasks_abandoned", count=abandoned)
            await asyncio.sleep(every)


async def _logged(event: str, step: Awaitable[int]) -> int:
    """A sweep step's count; 0 and a warning `event` when it fails."""
    try:
        return await step
    except Exception as exc:
        _log.warning(event, error=repr(exc))
        return 0


@asynccontextmanager
async def open_resources(
    settings: Settings, config: GatewayConfig, metrics: Metrics
) -> AsyncIterator[Runtime]:
    """The runtime, open and configured with `config` (`runtime.current`), closed after."""
    runtime = Runtime(settings, metrics)
    try:
        await runtime.open()
        await runtime.configure(config)
        yield runtime
    finally:
        await runtime.close()


def open_artifacts(
    settings: Settings, config: GatewayConfig, store: Store, blobs: BlobStore, metrics: Metrics
) -> ArtifactService:
    section = config.file.gateway
    policy = FetchPolicy(
        allow_http=section.fetch_allow_http,
        allowed_networks=parse_networks(section.fetch_allowed_networks),
    )
    return ArtifactService(
        store,
        blobs,
        UrlSigner(signing_secret(settings)),
        ReferenceFetcher(policy),
        retention_seconds=float(section.artifact_retention_days) * 86_400,
        public_url=settings.public_url,
        metrics=metrics,
        max_image_pixels=section.max_image_pixels,
    )


def open_worker(
    settings: Settings,
    config: GatewayConfig,
    store: Store,
    router: Router,
    artifacts: ArtifactService,
    metrics: Metrics,
) -> Worker:
    section = config.file.gateway
    return Worker(
        store,
        router,
        artifacts,
        worker_id=f"{socket.gethostname()}-{os.getpid()}-{new_call_id()[-8:]}",
        concurrency=settings.workers,
        lease_seconds=section.task_lease_seconds,
        max_attempts=section.task_max_attempts,
        metrics=metrics,
    )


def signing_secret(settings: Settings) -> bytes:
    """GATEWAY_SIGNING_SECRET, else a random one kept in the data folder (one host)."""
    if settings.signing_secret:
        return hashlib.sha256(settings.signing_secret.encode()).digest()
    path = settings.data_dir / "signing.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(secrets.token_bytes(32))
    return path.read_bytes()
