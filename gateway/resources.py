"""What the app opens at start and closes at stop; handlers reach it through DI."""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from gateway.admission import Gatekeeper
from gateway.artifacts import FetchPolicy, LocalBlobStore, ReferenceFetcher, UrlSigner
from gateway.artifacts.addresses import parse_networks
from gateway.artifacts.service import ArtifactService
from gateway.auth import Authenticator
from gateway.chat.service import ChatService
from gateway.config.loader import GatewayConfig
from gateway.finisher import CallFinisher
from gateway.health import StoreHealth
from gateway.ids import new_call_id
from gateway.logging import get_logger
from gateway.routing.resolver import Router
from gateway.settings import Settings
from gateway.store import store_from_url
from gateway.store.base import Store
from gateway.tasks.service import TaskService
from gateway.tasks.worker import Worker
from providers.registry import spec_for

__all__ = ["Resources", "open_artifacts", "open_resources", "open_worker"]

_log = get_logger("gateway.resources")


@dataclass(frozen=True, slots=True)
class Resources:
    settings: Settings
    config: GatewayConfig
    store: Store
    providers: dict[str, Any]
    """By name; each implements the `providers.base` protocols of the capabilities it serves."""
    router: Router
    auth: Authenticator
    gatekeeper: Gatekeeper
    finisher: CallFinisher
    health: StoreHealth
    chat: ChatService
    artifacts: ArtifactService
    tasks: TaskService
    worker: Worker


@asynccontextmanager
async def open_resources(settings: Settings, config: GatewayConfig) -> AsyncIterator[Resources]:
    store = store_from_url(settings.resolved_store_url, serving=True)
    await store.open()
    providers: dict[str, Any] = {}
    finisher = CallFinisher(store)
    worker: Worker | None = None
    sweeper: asyncio.Task[None] | None = None
    try:
        for name, entry in config.providers.items():
            providers[name] = spec_for(entry.kind).create(name, entry.options)
        router = Router(config, providers)
        gatekeeper = Gatekeeper(store)
        artifacts = open_artifacts(settings, config, store)
        worker = open_worker(settings, config, store, router, artifacts)
        finisher.start()
        worker.start()
        sweeper = asyncio.get_running_loop().create_task(sweep_artifacts(artifacts))
        yield Resources(
            settings=settings,
            config=config,
            store=store,
            providers=providers,
            router=router,
            auth=Authenticator(store, config, settings.resolved_key_cache_seconds),
            gatekeeper=gatekeeper,
            finisher=finisher,
            health=StoreHealth(store),
            chat=ChatService(
                finisher, router, gatekeeper, hold_seconds=config.file.gateway.hold_seconds
            ),
            artifacts=artifacts,
            tasks=TaskService(store, router, artifacts),
            worker=worker,
        )
    finally:
        if sweeper is not None:
            sweeper.cancel()
        if worker is not None:
            await worker.close()
        await finisher.close()
        for provider in providers.values():
            await provider.close()
        await store.close()


def open_artifacts(settings: Settings, config: GatewayConfig, store: Store) -> ArtifactService:
    section = config.file.gateway
    policy = FetchPolicy(
        allow_http=section.fetch_allow_http,
        allowed_networks=parse_networks(section.fetch_allowed_networks),
    )
    return ArtifactService(
        store,
        LocalBlobStore(settings.resolved_artifacts_dir),
        UrlSigner(signing_secret(settings)),
        ReferenceFetcher(policy),
        retention_seconds=float(section.artifact_retention_days) * 86_400,
        public_url=settings.public_url,
    )


def open_worker(
    settings: Settings,
    config: GatewayConfig,
    store: Store,
    router: Router,
    artifacts: ArtifactService,
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
    )


async def sweep_artifacts(artifacts: ArtifactService, every: float = 60.0) -> None:
    """Retention: expired artifacts are removed once a minute."""
    while True:
        await asyncio.sleep(every)
        try:
            await artifacts.sweep()
        except Exception as exc:  # the store may be away; the next round catches up
            _log.warning("artifact_sweep_failed", error=repr(exc))


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
