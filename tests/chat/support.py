"""A chat service on real parts (a SQLite store, the simulator provider), no HTTP at all."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.admission import Gatekeeper
from gateway.auth import Caller
from gateway.chat.service import ChatService
from gateway.config.loader import GatewayConfig, load_config
from gateway.finisher import CallFinisher
from gateway.routing.resolver import Router
from gateway.store.sqlite import SqliteStore
from providers.registry import spec_for
from tests.support.clock import Clock

__all__ = ["CONFIG", "ChatParts", "chat_parts"]

CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 1000
tokens_per_minute = 10000000

[providers.sim]
kind = "simulator"

[providers.sim_slow]
kind = "simulator"
tokens_per_second = 200

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
max_output_tokens = 256
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[[models]]
id = "sim-slow"
provider = "sim_slow"
capability = "chat"
max_output_tokens = 256
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[routing.auto]
chat = ["sim-chat-1"]

[tenants.default]

[tenants.limited]
requests_per_minute = 1
"""


@dataclass(frozen=True, slots=True)
class ChatParts:
    service: ChatService
    store: SqliteStore
    config: GatewayConfig
    router: Router
    clock: Clock

    def caller(self, tenant: str = "default") -> Caller:
        return Caller(key_id=f"key_{tenant}", tenant=self.config.tenants[tenant])


@asynccontextmanager
async def chat_parts(tmp_path: Path, *, grant: int = 10**9) -> AsyncIterator[ChatParts]:
    """A `ChatService` wired as the app wires it; the tenants' wallets hold `grant` units."""
    path = tmp_path / "gateway.toml"
    path.write_text(CONFIG)
    config = load_config(path)
    store = SqliteStore(tmp_path / "gateway.db")
    await store.open()
    providers: dict[str, Any] = {}
    try:
        for tenant in config.tenants:
            await store.grant(tenant, grant, entry_id=f"grant:{tenant}", reason="test")
        for name, entry in config.providers.items():
            providers[name] = spec_for(entry.kind).create(name, entry.options)
        clock = Clock()
        router = Router(config, providers, clock=clock)
        gatekeeper = Gatekeeper(store)
        service = ChatService(CallFinisher(store), router, gatekeeper, hold_seconds=60)
        yield ChatParts(service=service, store=store, config=config, router=router, clock=clock)
    finally:
        for provider in providers.values():
            await provider.close()
        await store.close()
