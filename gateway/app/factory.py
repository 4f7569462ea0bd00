"""The application factory: nothing happens at import time."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar
from litestar.di import Provide
from litestar.plugins import PluginProtocol
from litestar.plugins.core import MsgspecDIPlugin
from litestar.routes import ASGIRoute

from gateway.api import route_handlers
from gateway.api.dependencies import provide_caller, provide_resources
from gateway.api.openapi.controller import openapi_config
from gateway.app.resources import open_resources
from gateway.app.settings import Settings
from gateway.billing.money import UNITS_PER_CREDIT
from gateway.config.live import ConfigWatcher
from gateway.config.loader import GatewayConfig, load_config
from gateway.http.direct_routes import DirectRoutes
from gateway.http.exception_handler import handle_exception
from gateway.http.middleware import RequestContextMiddleware
from gateway.logging import configure_logging, name_the_process
from gateway.metrics import MetricsExporter, open_metrics

__all__ = ["GatewayLitestar", "create_app"]


class GatewayLitestar(Litestar):
    """Litestar with only the msgspec plugin it always adds.

    Litestar also adds its pydantic and attrs plugins whenever those libraries are installed
    (as they are beside many SDKs), importing them: ~0.13 s of every start, measured, for
    handlers that take and return msgspec Structs and bytes only."""

    @staticmethod
    def _get_default_plugins(plugins: list[PluginProtocol]) -> list[PluginProtocol]:
        return [*plugins, MsgspecDIPlugin()]


def create_app(settings: Settings | None = None, config: GatewayConfig | None = None) -> Litestar:
    """Build the app; the routing file is read now, so a bad one stops start-up here."""
    settings = settings or Settings.from_env()
    config = config or load_config(settings.config_path)
    several = settings.processes > 1
    configure_logging(settings.log_level)
    name_the_process(several)
    metrics, exporter = open_metrics(settings.metrics, units_per_credit=UNITS_PER_CREDIT)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with open_resources(settings, config, metrics) as runtime:
            app.state.resources = runtime.current

            async def apply(new: GatewayConfig) -> None:
                # Requests read app.state.resources when they start: they finish on theirs.
                app.state.resources = await runtime.configure(new)

            watcher = ConfigWatcher(
                config, apply, poll_seconds=settings.config_poll_seconds, recheck_at_start=several
            )
            watcher.start()
            publishing = _publish_facts(app, exporter) if exporter is not None else None
            # Everything built so far lives as long as the process. Freezing it keeps the
            # full collections from rescanning it: measured, they stalled the loop ~60 ms.
            gc.collect()
            gc.freeze()
            try:
                yield
            finally:
                await watcher.close()
                if publishing is not None:
                    publishing.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await publishing
                if exporter is not None:
                    exporter.retire()

    app = GatewayLitestar(
        route_handlers=route_handlers(),
        lifespan=[lifespan],
        dependencies={
            "resources": Provide(provide_resources, sync_to_thread=False),
            "caller": Provide(provide_caller),
        },
        exception_handlers={Exception: handle_exception},
        request_max_body_size=config.file.gateway.max_body_bytes,
        logging_config=None,
        openapi_config=openapi_config(),
    )
    app.state.metrics_exporter = exporter
    # Outermost, around Litestar's own handler: routing errors (404/405) get a request id,
    # headers, a log line and metrics like every other response.
    direct = DirectRoutes(_direct_routes(app), app.asgi_handler, handle_exception)
    app.asgi_handler = RequestContextMiddleware(direct, metrics)
    return app


def _direct_routes(app: Litestar) -> dict[str, tuple[Any, Any]]:
    """The plain ASGI routes that need nothing of the router but their handler (no guards,
    middleware, path parameters, scope copy or exception handlers of their own):
    `DirectRoutes` calls them itself."""
    routes: dict[str, tuple[Any, Any]] = {}
    for route in app.routes:
        if not isinstance(route, ASGIRoute) or route.path_parameters:
            continue
        handler = route.route_handler
        if handler.resolve_guards() or handler.resolve_middleware() or handler.copy_scope:
            continue
        if handler.resolve_exception_handlers() != app.exception_handlers:
            continue
        routes[route.path] = (handler.fn, handler)
    return routes


_PUBLISH_SECONDS = 1.0


def _publish_facts(app: Litestar, exporter: MetricsExporter) -> asyncio.Task[None] | None:
    """Multiprocess mode: this process's routing-file version, breakers and process metrics
    to the shared folder once a second, so a scrape answered by another process shows them
    (at most a second old; the answering process's own are read at the scrape)."""
    if not exporter.multiprocess:
        return None

    async def publish() -> None:
        while True:
            resources = app.state.resources
            exporter.publish(resources.config.version, resources.router.breaker_states())
            await asyncio.sleep(_PUBLISH_SECONDS)

    return asyncio.get_running_loop().create_task(publish())
