"""`gateway serve`: one uvicorn process on uvloop + httptools (with bounded request heads and
read timeouts, `gateway.http.protocol`), no access log (we log ourselves)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys

import uvicorn

from gateway.app.bootstrap import bootstrap_embedded
from gateway.app.factory import create_app
from gateway.app.settings import Settings
from gateway.artifacts.store_url import blob_store_from_url, close_blob_store, open_blob_store
from gateway.config.loader import GatewayConfig
from gateway.http.protocol import HttpLimits, bounded_protocol
from gateway.store import store_from_url
from gateway.store.sqlite.lock import StoreLocked, claim_for_serving

__all__ = ["serve"]


async def _bootstrap(settings: Settings, config: GatewayConfig) -> str | None:
    store = store_from_url(settings.resolved_store_url)
    await store.open()
    try:
        return await bootstrap_embedded(store, config, settings.data_dir)
    finally:
        await store.close()


async def _check_blobs(settings: Settings) -> None:
    """The artifact store answers and its bucket exists (S3), before anything is printed."""
    if not settings.artifacts_url.startswith("s3:"):
        return  # a local folder: nothing to check, and botocore (~20 MB) stays unloaded
    from gateway.artifacts.s3 import BucketUnusable

    blobs = blob_store_from_url(settings.artifacts_url, settings.resolved_artifacts_dir)
    try:
        await open_blob_store(blobs)
    except BucketUnusable as exc:
        raise StartupError(f"GATEWAY_ARTIFACTS_URL: {exc}") from exc
    await close_blob_store(blobs)


class StartupError(Exception):
    """A mistake found before serving: one line for the operator, exit code 2."""


def serve(settings: Settings, config: GatewayConfig) -> int:
    """Checks everything that can be wrong before printing anything, then serves until
    SIGINT or SIGTERM (both drain in-flight requests first)."""
    try:
        sock = _checked_start(settings)
        asyncio.run(_check_blobs(settings))
        key = asyncio.run(_bootstrap(settings, config)) if settings.embedded else None
    except StartupError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    base_url = f"http://{settings.host}:{settings.port}/v1"
    print(f"Gateway base URL: {base_url}", flush=True)
    print(f"Store: {settings.resolved_store_url}", flush=True)
    print(f"Routing file: {config.path} (version {config.version})", flush=True)
    if key is not None:
        print(f"API key (tenant default): {key}", flush=True)
    elif not settings.embedded:
        print(
            "Keys and credits: gateway keys create --tenant NAME; "
            "gateway credits grant --tenant NAME --amount N --reason TEXT",
            flush=True,
        )
    app = create_app(settings, config)
    section = config.file.gateway
    limits = HttpLimits(
        max_head_bytes=section.max_header_bytes,
        max_headers=section.max_headers,
        head_timeout=section.header_timeout_seconds,
        body_idle_timeout=section.body_idle_timeout_seconds,
        write_timeout=section.write_timeout_seconds,
    )
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            loop="uvloop",
            http=bounded_protocol(limits),
            access_log=False,
            log_level="warning",
            log_config=None,  # its loggers reach ours (gateway.logging): one format
            lifespan="on",
        )
    )
    # uvicorn drains on SIGINT and SIGTERM, then raises the signal again under the handler it
    # found: with this one SIGTERM ends here too, so the stop is said like SIGINT's.
    signal.signal(signal.SIGTERM, lambda *_: None)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    print("Gateway stopped.", file=sys.stderr, flush=True)
    return 0


def _checked_start(settings: Settings) -> socket.socket:
    """The store URL, the embedded store's lock and the listening socket, before any output."""
    try:
        store_from_url(settings.resolved_store_url)
    except ValueError as exc:
        raise StartupError(f"GATEWAY_STORE_URL: {exc}") from exc
    try:
        blob_store_from_url(settings.artifacts_url, settings.resolved_artifacts_dir)
    except ValueError as exc:
        raise StartupError(f"GATEWAY_ARTIFACTS_URL: {exc}") from exc
    if settings.embedded or settings.resolved_store_url.startswith("sqlite:"):
        path = settings.resolved_store_url.removeprefix("sqlite:///")
        try:
            claim_for_serving(path).close()  # free again: the app claims it for good
        except StoreLocked as exc:
            raise StartupError(str(exc)) from exc
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        raise StartupError(
            f"cannot listen on {settings.host}:{settings.port}: {exc.strerror} "
            "(set GATEWAY_PORT or --port)"
        ) from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock
