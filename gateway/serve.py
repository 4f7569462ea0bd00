"""`gateway serve`: one uvicorn process on uvloop + httptools, no access log (we log ourselves)."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import uvicorn

from gateway.app import create_app
from gateway.bootstrap import bootstrap_embedded
from gateway.routing.config import GatewayConfig
from gateway.settings import Settings
from gateway.store import store_from_url

__all__ = ["serve"]


async def _bootstrap(settings: Settings, config: GatewayConfig) -> str | None:
    store = store_from_url(settings.resolved_store_url)
    await store.open()
    try:
        return await bootstrap_embedded(store, config, settings.data_dir)
    finally:
        await store.close()


def serve(settings: Settings, config: GatewayConfig) -> int:
    key = asyncio.run(_bootstrap(settings, config)) if settings.embedded else None
    base_url = f"http://{settings.host}:{settings.port}/v1"
    print(f"Gateway base URL: {base_url}", flush=True)
    print(f"Store: {settings.resolved_store_url}", flush=True)
    if key is not None:
        print(f"API key (tenant default): {key}", flush=True)
    app = create_app(settings, config)
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            loop="uvloop",
            http="httptools",
            access_log=False,
            log_level="warning",
            lifespan="on",
        )
    print("Gateway stopped.", file=sys.stderr)
    return 0
