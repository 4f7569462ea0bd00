"""`gateway serve`: one uvicorn process on uvloop + httptools (with bounded request heads and
read timeouts, `gateway.http_protocol`), no access log (we log ourselves)."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import uvicorn

from gateway.app import create_app
from gateway.bootstrap import bootstrap_embedded
from gateway.config.loader import GatewayConfig
from gateway.http_protocol import HttpLimits, bounded_protocol
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
    section = config.file.gateway
    limits = HttpLimits(
        max_head_bytes=section.max_header_bytes,
        max_headers=section.max_headers,
        head_timeout=section.header_timeout_seconds,
        body_idle_timeout=section.body_idle_timeout_seconds,
    )
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            loop="uvloop",
            http=bounded_protocol(limits),
            access_log=False,
            log_level="warning",
            lifespan="on",
        )
    print("Gateway stopped.", file=sys.stderr)
    return 0
