"""GET /v1/tasks, GET /v1/tasks/{id}, POST /v1/tasks/{id}/cancel (Preview)."""

from __future__ import annotations

from typing import Any, cast

from litestar import get, post
from litestar.params import Parameter

from gateway.api.task_view import task_view
from gateway.auth import Caller
from gateway.config.schema import CAPABILITIES
from gateway.errors import ErrorDetail, ValidationFailed
from gateway.resources import Resources
from gateway.store.base import TaskStatus

__all__ = ["HANDLERS"]

_STATUSES = ("queued", "running", "succeeded", "failed", "canceled")
_MEDIA = tuple(c for c in CAPABILITIES if c != "chat")


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(
        f"{field}: {message}", details=[ErrorDetail(field=field, message=message)]
    )


@get("/v1/tasks")
async def list_tasks(
    caller: Caller,
    resources: Resources,
    limit: str = Parameter(query="limit", default="20"),
    after: str | None = Parameter(query="after", default=None),
    status: str | None = Parameter(query="status", default=None),
    capability: str | None = Parameter(query="capability", default=None),
) -> dict[str, Any]:
    if not limit.isdigit() or not 1 <= int(limit) <= 100:
        raise _invalid("limit", "an integer from 1 to 100")
    if status is not None and status not in _STATUSES:
        raise _invalid("status", f"one of {', '.join(_STATUSES)}")
    if capability is not None and capability not in _MEDIA:
        raise _invalid("capability", f"one of {', '.join(_MEDIA)}")
    page = await resources.tasks.list(
        caller,
        limit=int(limit),
        after=after or None,
        status=cast(TaskStatus | None, status),
        capability=capability,
    )
    rate = caller.tenant.credits_per_usd
    data = [task_view(task, resources.artifacts, rate) for task in page.tasks]
    return {
        "object": "list",
        "data": data,
        "has_more": page.has_more,
        "next_after": page.tasks[-1].task_id if page.has_more and page.tasks else None,
    }


@get("/v1/tasks/{task_id:str}")
async def get_task(caller: Caller, resources: Resources, task_id: str) -> dict[str, Any]:
    task = await resources.tasks.get(caller, task_id)
    return task_view(task, resources.artifacts, caller.tenant.credits_per_usd)


@post("/v1/tasks/{task_id:str}/cancel", status_code=200)
async def cancel_task(caller: Caller, resources: Resources, task_id: str) -> dict[str, Any]:
    task = await resources.tasks.cancel(caller, task_id)
    return task_view(task, resources.artifacts, caller.tenant.credits_per_usd)


HANDLERS = [cancel_task, get_task, list_tasks]
