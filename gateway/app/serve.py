"""`gateway serve`: uvicorn on uvloop + httptools (with bounded request heads and read
timeouts, `gateway.http.protocol`), no access log (we log ourselves). One process, or with
`--processes N` (Redis only) N of them on one port under a supervisor (`gateway.app.processes`).

Nothing here imports the metrics at module level: prometheus-client picks its multiprocess mode
when it is first imported, so with several processes their folder is set first."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import signal
import socket
import sys

import uvicorn

from gateway.app.bootstrap import bootstrap_embedded
from gateway.app.collector import settle_collector
from gateway.app.processes import (
    STARTUP_FAILED,
    MetricsFolder,
    Supervisor,
    listen_shared,
    worker_shares,
)
from gateway.app.settings import MAX_PROCESSES, Settings
from gateway.artifacts.store_url import blob_store_from_url, close_blob_store, open_blob_store
from gateway.config.loader import GatewayConfig
from gateway.http.protocol import HttpLimits, bounded_protocol
from gateway.store import store_from_url
from gateway.store.sqlite.lock import StoreLocked, claim_for_serving

__all__ = ["StartupError", "run_server", "serve"]


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


async def _check_shards(settings: Settings) -> None:
    """A Redis store's task queue is in the URL's shard count (docs/store.md, "Changing the
    shard count")."""
    from gateway.store.redis import RedisStore
    from gateway.store.redis.shard_count import shard_count_refusal

    store = store_from_url(settings.resolved_store_url)
    if not isinstance(store, RedisStore):
        return
    await store.open()
    try:
        refusal = await shard_count_refusal(store)
    finally:
        await store.close()
    if refusal is not None:
        raise StartupError(refusal)


class StartupError(Exception):
    """A mistake found before serving: one line for the operator, exit code 2."""


def serve(settings: Settings, config: GatewayConfig) -> int:
    """Checks everything that can be wrong before printing anything, then serves until
    SIGINT or SIGTERM (both drain in-flight requests first)."""
    try:
        sockets = _checked_start(settings)
        asyncio.run(_check_blobs(settings))
        asyncio.run(_check_shards(settings))
        key = asyncio.run(_bootstrap(settings, config)) if settings.embedded else None
        metrics = _prepare_processes(settings) if settings.processes > 1 else None
    except StartupError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    _banner(settings, config, key)
    if settings.processes > 1:
        code = Supervisor(settings, config, sockets, run_server, metrics).run()
    else:
        run_server(settings, config, sockets[0])
        code = 0
    print("Gateway stopped.", file=sys.stderr, flush=True)
    return code


def _banner(settings: Settings, config: GatewayConfig, key: str | None) -> None:
    base_url = f"http://{settings.host}:{settings.port}/v1"
    print(f"Gateway base URL: {base_url}", flush=True)
    print(f"Store: {settings.resolved_store_url}", flush=True)
    print(f"Routing file: {config.path} (version {config.version})", flush=True)
    if settings.processes > 1:
        shares = " + ".join(map(str, worker_shares(settings.workers, settings.processes)))
        print(
            f"Processes: {settings.processes} serving the port (task workers {shares})",
            flush=True,
        )
    else:
        print("Processes: 1", flush=True)
    if key is not None:
        print(f"API key (tenant default): {key}", flush=True)
    elif not settings.embedded:
        print(
            "Keys and credits: gateway keys create --tenant NAME; "
            "gateway credits grant --tenant NAME --amount N --reason TEXT",
            flush=True,
        )


def _prepare_processes(settings: Settings) -> MetricsFolder | None:
    """What the processes share, made once before they start: the metrics folder (before
    prometheus-client is loaded), the loaded modules, the artifact-signing key."""
    metrics = None
    if settings.metrics:
        try:
            metrics = MetricsFolder.prepare()
        except ValueError as exc:
            raise StartupError(str(exc)) from exc
    importlib.import_module("gateway.app.factory")  # loaded once, shared by the processes
    from gateway.app.resources import signing_secret

    try:
        signing_secret(settings)  # a new random key is written here, not raced by N processes
    except OSError as exc:
        if metrics is not None:
            metrics.close()
        raise StartupError(f"GATEWAY_DATA_DIR: cannot keep the signing key: {exc}") from exc
    return metrics


def run_server(settings: Settings, config: GatewayConfig, sock: socket.socket) -> int:
    """One server on `sock` until SIGINT or SIGTERM; STARTUP_FAILED when it never served."""
    from gateway.app.factory import create_app  # see the module's docstring

    app = create_app(settings, config)
    settle_collector()
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
    return 0 if server.started else STARTUP_FAILED


def _checked_start(settings: Settings) -> list[socket.socket]:
    """The store URL, the embedded store's lock and the listening sockets, before any output."""
    try:
        store_from_url(settings.resolved_store_url)
    except ValueError as exc:
        raise StartupError(f"GATEWAY_STORE_URL: {exc}") from exc
    try:
        blob_store_from_url(settings.artifacts_url, settings.resolved_artifacts_dir)
    except ValueError as exc:
        raise StartupError(f"GATEWAY_ARTIFACTS_URL: {exc}") from exc
    if not 1 <= settings.processes <= MAX_PROCESSES:
        raise StartupError(
            f"--processes must be from 1 to {MAX_PROCESSES} (got {settings.processes})"
        )
    if settings.processes > 1 and settings.resolved_store_url.startswith("sqlite:"):
        raise StartupError(
            f"--processes {settings.processes} needs a Redis store (GATEWAY_STORE_URL=redis://"
            "...): the SQLite store keeps holds and rate buckets in one process's memory"
        )
    if settings.embedded or settings.resolved_store_url.startswith("sqlite:"):
        path = settings.resolved_store_url.removeprefix("sqlite:///")
        try:
            claim_for_serving(path).close()  # free again: the app claims it for good
        except StoreLocked as exc:
            raise StartupError(str(exc)) from exc
    try:
        if settings.processes > 1:
            return listen_shared(settings.host, settings.port, settings.processes)
        return [_listen(settings.host, settings.port)]
    except OSError as exc:
        raise StartupError(
            f"cannot listen on {settings.host}:{settings.port}: {exc.strerror} "
            "(set GATEWAY_PORT or --port)"
        ) from exc


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock
