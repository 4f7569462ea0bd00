"""The callback delivery worker as the composition root builds it: its sender from the routing
file's `callback_allowed_networks`, its schedule from `callback_retry_seconds`, and the task as
the API shows it (`gateway.api.task_view`) for the body."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gateway.api.task_view import task_view
from gateway.artifacts.service import ArtifactService
from gateway.callbacks.schedule import STANDARD_WAITS
from gateway.callbacks.sender import CallbackSender
from gateway.callbacks.urls import CallbackPolicy
from gateway.callbacks.worker import CallbackWorker, Render
from gateway.config.loader import GatewayConfig
from gateway.metrics import Metrics
from gateway.store.base import Store, TaskRecord

__all__ = [
    "callback_policy",
    "callback_render",
    "open_callbacks",
    "retry_waits",
    "update_callbacks",
]

_DEFAULT_RATE = Decimal(1000)


def callback_policy(config: GatewayConfig) -> CallbackPolicy:
    return CallbackPolicy.of(config.file.gateway.callback_allowed_networks)


def retry_waits(config: GatewayConfig) -> tuple[float, ...]:
    return tuple(config.file.gateway.callback_retry_seconds) or STANDARD_WAITS


def callback_render(config: GatewayConfig, artifacts: ArtifactService) -> Render:
    def render(task: TaskRecord) -> dict[str, Any]:
        tenant = config.tenants.get(task.tenant)
        rate = tenant.credits_per_usd if tenant is not None else _DEFAULT_RATE
        return task_view(task, artifacts, rate)

    return render


def open_callbacks(
    config: GatewayConfig,
    store: Store,
    artifacts: ArtifactService,
    metrics: Metrics,
    *,
    enabled: bool,
) -> CallbackWorker:
    return CallbackWorker(
        store,
        CallbackSender(callback_policy(config)),
        callback_render(config, artifacts),
        retry_waits=retry_waits(config),
        concurrency=16 if enabled else 0,
        metrics=metrics,
    )


def update_callbacks(
    worker: CallbackWorker, config: GatewayConfig, artifacts: ArtifactService
) -> None:
    worker.use(
        CallbackSender(callback_policy(config)),
        callback_render(config, artifacts),
        retry_waits(config),
    )
