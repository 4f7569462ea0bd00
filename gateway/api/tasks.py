"""GET /v1/tasks, GET /v1/tasks/{id}, POST /v1/tasks/{id}/cancel (Preview)."""

from __future__ import annotations

from typing import Any, cast

from litestar import get, post
from litestar.params import Parameter

from gateway.api.openapi.doc import OperationDoc, documented
from gateway.api.query import page_limit
from gateway.api.resources import Resources
from gateway.api.task_view import task_view
from gateway.auth import Caller
from gateway.config.schema import CAPABILITIES
from gateway.errors import ErrorDetail, ValidationFailed
from gateway.schemas.tasks import TaskList, TaskView
from gateway.store.base import TaskStatus

__all__ = ["HANDLERS"]

_STATUSES = ("queued", "running", "succeeded", "failed", "canceled")
_MEDIA = tuple(c for c in CAPABILITIES if c != "chat")


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(
        f"{field}: {message}", details=[ErrorDetail(field=field, message=message)]
    )


@get(
    "/v1/tasks",
    opt=documented(
        OperationDoc(
            summary="List your tasks, newest first",
            tag="Tasks",
            release="Preview",
            responses={200: TaskList},
            errors=(422,),
            query={
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                "after": {"type": "string", "description": "The last task id of a page."},
                "status": {"enum": list(_STATUSES)},
                "capability": {"enum": list(_MEDIA)},
            },
        )
    ),
)
async def list_tasks(
    caller: Caller,
    resources: Resources,
    limit: str = Parameter(query="limit", default="20"),
    after: str | None = Parameter(query="after", default=None),
    status: str | None = Parameter(query="status", default=None),
    capability: str | None = Parameter(query="capability", default=None),
) -> dict[str, Any]:
    size = page_limit(limit, high=100)
    if status is not None and status not in _STATUSES:
        raise _invalid("status", f"one of {', '.join(_STATUSES)}")
    if capability is not None and capability not in _MEDIA:
        raise _invalid("capability", f"one of {', '.join(_MEDIA)}")
    page = await resources.tasks.list(
        caller,
        limit=size,
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


@get(
    "/v1/tasks/{task_id:str}",
    opt=documented(
        OperationDoc(
            summary="Get a task",
            tag="Tasks",
            release="Preview",
            responses={200: TaskView},
            errors=(404,),
            description="Another tenant's task is a 404, as if it did not exist.",
        )
    ),
)
async def get_task(caller: Caller, resources: Resources, task_id: str) -> dict[str, Any]:
    task = await resources.tasks.get(caller, task_id)
    return task_view(task, resources.artifacts, caller.tenant.credits_per_usd)


@post(
    "/v1/tasks/{task_id:str}/cancel",
    status_code=200,
    opt=documented(
        OperationDoc(
            summary="Cancel a task (best effort)",
            tag="Tasks",
            release="Preview",
            responses={200: TaskView},
            errors=(404,),
            description="A queued task is canceled and refunded at once; a running one when its "
            "worker next checks; a finished one is returned unchanged.",
        )
    ),
)
async def cancel_task(caller: Caller, resources: Resources, task_id: str) -> dict[str, Any]:
    task = await resources.tasks.cancel(caller, task_id)
    return task_view(task, resources.artifacts, caller.tenant.credits_per_usd)


HANDLERS = [cancel_task, get_task, list_tasks]
