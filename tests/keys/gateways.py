"""Gateway replicas in process on one store: `create_app` N times on one Redis (or once on
SQLite, which serves one process), each driven through its own AsyncTestClient, with the
admin API on (keys are created through it)."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from litestar import Litestar
from litestar.testing import AsyncTestClient

from gateway.admin.token import hash_admin_token, new_admin_token
from gateway.app.factory import create_app
from gateway.app.settings import Settings
from gateway.config.loader import load_config
from gateway.store import store_from_url

__all__ = ["Replicas", "auth", "chat", "replicas"]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = new_admin_token()


@dataclass
class Replicas:
    clients: list[AsyncTestClient[Litestar]]
    store_url: str

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}

    async def new_key(self, **fields: Any) -> tuple[str, str]:
        """(key, key id) of a new key of the default tenant with these fields."""
        made = await self.clients[0].post(
            "/admin/v1/keys", json={"tenant": "default", **fields}, headers=self.admin
        )
        assert made.status_code == 201, made.text
        return made.json()["key"], made.json()["id"]

    async def key(self, key_id: str) -> dict[str, Any]:
        got = await self.clients[-1].get(f"/admin/v1/keys/{key_id}", headers=self.admin)
        assert got.status_code == 200, got.text
        result: dict[str, Any] = got.json()
        return result

    async def ledger_of(self, key_id: str) -> list[dict[str, Any]]:
        """The tenant's ledger entries of this key (read from the store)."""
        store = store_from_url(self.store_url)
        await store.open()
        try:
            entries, after = [], None
            while True:
                page = await store.ledger("default", limit=100, after=after)
                entries += page.entries
                if not page.has_more:
                    break
                after = page.entries[-1].id
        finally:
            await store.close()
        return [
            {"id": e.id, "kind": e.kind, "amount_units": e.amount_units, "at": e.created_at}
            for e in entries
            if e.key_id == key_id
        ]


def chat(model: str = "sim-chat-1", max_tokens: int = 40) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Say something short."}],
        "max_tokens": max_tokens,
    }


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def replicas(tmp_path: Path, store_url: str, count: int) -> AsyncIterator[Replicas]:
    config_path = tmp_path / "gateway.toml"
    config_path.write_text((ROOT / "config" / "gateway.toml").read_text())
    config = load_config(config_path)
    store = store_from_url(store_url)
    await store.open()
    try:
        await store.grant("default", 10**9, entry_id="grant:test", reason="test")
    finally:
        await store.close()
    async with AsyncExitStack() as stack:
        stack.enter_context(mock.patch.object(gc, "freeze"))  # (see tests/api/support.py)
        clients = []
        for i in range(count):
            settings = Settings(
                config_path=config_path,
                data_dir=tmp_path / f"data{i}",
                workers=0,
                store_url=store_url,
                admin_token_hash=hash_admin_token(TOKEN),
            )
            client = AsyncTestClient(create_app(settings, config), base_url="http://gw.local")
            clients.append(await stack.enter_async_context(client))
        yield Replicas(clients=clients, store_url=store_url)
