"""What the app opens at start and closes at stop; handlers reach it through DI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from gateway.admission import Gatekeeper
from gateway.auth import Authenticator
from gateway.chat.service import ChatService
from gateway.finisher import CallFinisher
from gateway.health import StoreHealth
from gateway.routing.config import GatewayConfig
from gateway.routing.resolver import Router
from gateway.settings import Settings
from gateway.store import store_from_url
from gateway.store.base import Store
from providers.base import ChatProvider
from providers.registry import spec_for

__all__ = ["Resources", "open_resources"]


@dataclass(frozen=True, slots=True)
class Resources:
    settings: Settings
    config: GatewayConfig
    store: Store
    providers: dict[str, ChatProvider]
    router: Router
    auth: Authenticator
    gatekeeper: Gatekeeper
    finisher: CallFinisher
    health: StoreHealth
    chat: ChatService


@asynccontextmanager
async def open_resources(settings: Settings, config: GatewayConfig) -> AsyncIterator[Resources]:
    store = store_from_url(settings.resolved_store_url, serving=True)
    await store.open()
    providers: dict[str, ChatProvider] = {}
    finisher = CallFinisher(store)
    try:
        for name, entry in config.providers.items():
            providers[name] = spec_for(entry.kind).create(name, entry.options)
        router = Router(config, providers)
        gatekeeper = Gatekeeper(store)
        finisher.start()
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
        )
    finally:
        await finisher.close()
        for provider in providers.values():
            await provider.close()
        await store.close()
