"""What the image and music create endpoints share: read the JSON body, create the task,
answer 202 with the envelope (`Idempotent-Replayed: true` on a replay), and their OpenAPI
description."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response

from gateway.api.dependencies import authenticate, count_refused
from gateway.api.openapi.doc import OperationDoc, documented
from gateway.api.resources import Resources
from gateway.api.task_view import task_view
from gateway.errors import GatewayError, ValidationFailed
from gateway.http.context import context_of
from gateway.http.json_body import OPTIONS_HINT, decode_json, require_json_content_type
from gateway.schemas.media import MediaRequest
from gateway.schemas.tasks import TaskView

__all__ = ["create_doc", "create_task"]

_encode = msgspec.json.Encoder().encode


def create_doc(
    summary: str,
    tag: str,
    body: Any,
    description: str,
    example: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `opt=` of a create endpoint: 202 with the task, prepaid (402), validated (422)."""
    return documented(
        OperationDoc(
            summary=summary,
            tag=tag,
            release="Preview",
            body=body,
            example=example,
            responses={202: TaskView},
            errors=(402, 422),
            idempotent=True,
            headers={202: {"Location": True, "Idempotent-Replayed": False}},
            description=description
            + " The price is debited when the task is created (402 when the wallet cannot "
            "cover it) and refunded when it fails. Poll the task (`Location`) until it ends.",
        )
    )


async def create_task(
    request: Request[Any, Any, Any],
    resources: Resources,
    capability: str,
    decoder: msgspec.json.Decoder[Any],
) -> Response[bytes]:
    ctx = context_of(request.scope)
    caller = await authenticate(ctx, resources)
    try:
        require_json_content_type(ctx.content_type)
        parsed: MediaRequest = decode_json(
            await request.body(), decoder, ValidationFailed, unknown_hint=OPTIONS_HINT
        )
        accepted = await resources.tasks.create(
            caller,
            capability,
            parsed,
            path=request.url.path,
            request_id=ctx.request_id,
            idempotency_key=ctx.idempotency_key,
        )
    except GatewayError as exc:
        await count_refused(ctx, resources, caller, exc)
        raise
    ctx.model = accepted.task.resolved_model
    ctx.rate = msgspec.structs.replace(accepted.rate, limit_tokens=0)
    headers = {"Location": f"/v1/tasks/{accepted.task.task_id}"}
    if accepted.replayed:
        ctx.replayed = True
        headers["Idempotent-Replayed"] = "true"
    body = task_view(accepted.task, resources.artifacts, caller.tenant.credits_per_usd)
    return Response(_encode(body), status_code=202, media_type="application/json", headers=headers)
