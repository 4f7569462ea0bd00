"""Operators' task callback actions (admin API and CLI alike): rotate a tenant's signing
secret, redeliver a task's callback, list the deliveries that failed."""

from __future__ import annotations

from gateway.admin.service import require_tenant
from gateway.callbacks.signing import new_secret
from gateway.config.loader import GatewayConfig
from gateway.errors import NotFound, ValidationFailed
from gateway.store.base import TERMINAL, CallbackSecrets, Store, TaskRecord

__all__ = ["ROTATION_GRACE_SECONDS", "failed_callbacks", "redeliver", "rotate_secret"]

ROTATION_GRACE_SECONDS = 86_400.0
"""How long the replaced secret still signs every delivery (beside the new one)."""


async def rotate_secret(store: Store, config: GatewayConfig, tenant: str) -> CallbackSecrets:
    """A new `whsec_` secret for `tenant` (made now if it had none); the one it replaces still
    signs for 24 hours."""
    require_tenant(config, tenant)
    return await store.rotate_callback_secret(
        tenant, new_secret(), grace_seconds=ROTATION_GRACE_SECONDS
    )


async def redeliver(
    store: Store, config: GatewayConfig, task_id: str, *, tenant: str | None = None
) -> TaskRecord:
    """One more attempt of the task's callback with the same `webhook-id`. The task is found
    among the routing file's tenants unless `tenant` names it."""
    if tenant is not None:
        require_tenant(config, tenant)
    tenants = [tenant] if tenant is not None else sorted(config.tenants)
    for name in tenants:
        task = await store.get_task(name, task_id)
        if task is None:
            continue
        if task.callback is None:
            raise ValidationFailed(f"Task {task_id} has no callback.")
        if task.status not in TERMINAL:
            raise ValidationFailed(f"Task {task_id} has not ended: its callback is not due yet.")
        again = await store.redeliver_callback(name, task_id)
        if again is None:
            break
        return again
    raise NotFound("No such task.")


async def failed_callbacks(store: Store, *, limit: int = 50) -> list[TaskRecord]:
    return await store.failed_callbacks(limit=limit)
