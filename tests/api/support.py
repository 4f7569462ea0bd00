"""The app from its factory, in process: `create_app(settings, config)` on a temporary data
folder, driven through Litestar's AsyncTestClient (the lifespan runs, no socket is opened)."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from litestar import Litestar
from litestar.testing import AsyncTestClient

from gateway.app.bootstrap import bootstrap_embedded
from gateway.app.factory import create_app
from gateway.app.settings import Settings
from gateway.auth.issuing import issue_key
from gateway.config.loader import GatewayConfig, load_config
from gateway.store import store_from_url

__all__ = ["InProcessApp", "in_process_app"]

ROOT = Path(__file__).resolve().parents[2]

# The shipped routing file (simulator chat, image and music models), and a tenant of one
# request per minute.
EXTRA_TENANTS = """
[tenants.limited]
models = ["*"]
requests_per_minute = 1
"""


@dataclass(frozen=True, slots=True)
class InProcessApp:
    app: Litestar
    client: AsyncTestClient[Litestar]
    config: GatewayConfig
    keys: dict[str, str]
    """A key per tenant, each granted credits before the app started."""

    @property
    def key(self) -> str:
        return self.keys["default"]

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}


@asynccontextmanager
async def in_process_app(tmp_path: Path, **overrides: Any) -> AsyncIterator[InProcessApp]:
    """`overrides`: Settings fields to set beyond the test defaults (e.g. admin_token_hash)."""
    config_path = tmp_path / "gateway.toml"
    config_path.write_text((ROOT / "config" / "gateway.toml").read_text() + EXTRA_TENANTS)
    config = load_config(config_path)
    base = Settings(config_path=config_path, data_dir=tmp_path / "data", workers=0)
    settings = dataclasses.replace(base, **overrides)
    # As `gateway serve` does on the embedded store: the default tenant's key and starting
    # grant; and one for the limited tenant. The test client runs the app on a thread of its
    # own, so the app's store is not used from the test: this is done before it starts.
    store = store_from_url(settings.resolved_store_url)
    await store.open()
    try:
        default_key = await bootstrap_embedded(store, config, settings.data_dir)
        assert default_key is not None
        limited_key, _ = await issue_key(store, config, "limited")
        await store.grant("limited", 10**8, entry_id="grant:limited", reason="test")
    finally:
        await store.close()
    app = create_app(settings, config)
    keys = {"default": default_key, "limited": limited_key}
    # The lifespan freezes what it built, for a long-lived server (gateway/app/factory.py).
    # Here the app lives for one test: frozen, it would never be freed; unfrozen afterwards,
    # so would what the test session froze (tests/conftest.py), for every collection to walk.
    with mock.patch.object(gc, "freeze"):
        async with AsyncTestClient(app, base_url="http://gateway.local") as client:
            yield InProcessApp(app=app, client=client, config=config, keys=keys)
