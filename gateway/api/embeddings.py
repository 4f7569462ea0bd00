"""POST /v1/embeddings (Available): OpenAI's embeddings request and answer.

A plain ASGI handler as chat's (`gateway.api.chat`): authenticate, read and decode the body
(an invalid one is 400 `invalid_request` naming the field, as on chat), hand it to the
embeddings service, send its JSON or the replayed reply with `x-gateway-model` and
`x-gateway-route`, and note the model, the route and the rate state for the middleware's
log line and metrics.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import asgi

from gateway.api.dependencies import authenticate, count_refused
from gateway.api.openapi.doc import OperationDoc, documented
from gateway.api.resources import Resources
from gateway.api.responses import route_headers, send_bytes, send_reply
from gateway.embeddings.service import EMBEDDINGS_PATH, EmbeddingsAnswered
from gateway.errors import GatewayError, InvalidRequest, MethodNotAllowed
from gateway.http.context import context_of
from gateway.http.json_body import decode_json, read_body, require_json_content_type
from gateway.schemas.embeddings import EmbeddingList, EmbeddingsRequest

__all__ = ["HANDLERS", "create_embeddings"]

_REQUEST = msgspec.json.Decoder(EmbeddingsRequest)
_ROUTED = {"x-gateway-model": False, "x-gateway-route": False}
_UPSTREAM = {**_ROUTED, "Retry-After": False}
_DOC = OperationDoc(
    summary="Create embeddings",
    tag="Embeddings",
    release="Available",
    method="POST",
    body=EmbeddingsRequest,
    example={"model": "auto", "input": "The food was delicious."},
    responses={200: EmbeddingList},
    errors=(400, 402, 404, 409, 422, 502, 504),
    idempotent=True,
    tokens=True,
    headers={
        200: {"x-gateway-model": True, "x-gateway-route": True, "Idempotent-Replayed": False},
        400: _ROUTED,
        502: _UPSTREAM,
        503: _UPSTREAM,
        504: _UPSTREAM,
    },
    description="OpenAI's request and answer: `input` is a string, an array of strings, an "
    "array of token ids or an array of token arrays (at most 2048 inputs); `dimensions` "
    "shortens the vectors where the model allows it; `encoding_format: base64` gives each "
    "vector as the base64 of its little-endian float32 values. `model` is `auto` or an "
    "embeddings model you may use (else 404 `model_not_found`). An invalid body is 400 "
    "`invalid_request` with one `details[]` item per problem. Postpaid: a hold for the "
    "input's token bound is placed first (402 when the wallet cannot cover it), the charge "
    "is in `usage.credits`.",
)


@asgi(EMBEDDINGS_PATH, copy_scope=False, opt=documented(_DOC))
async def create_embeddings(scope: Any, receive: Any, send: Any) -> None:
    if scope["method"] != "POST":
        raise MethodNotAllowed()
    resources: Resources = scope["app"].state.resources
    ctx = context_of(scope)
    caller = await authenticate(ctx, resources)
    try:
        require_json_content_type(ctx.content_type)
        body = await read_body(receive, resources.config.file.gateway.max_body_bytes)
        outcome = await resources.embeddings.handle(
            caller,
            decode_json(body, _REQUEST, InvalidRequest),
            request_id=ctx.request_id,
            idempotency_key=ctx.idempotency_key,
        )
    except GatewayError as exc:
        await count_refused(ctx, resources, caller, exc)
        raise
    ctx.model = outcome.model
    ctx.rate = outcome.rate
    if isinstance(outcome, EmbeddingsAnswered):
        ctx.routing, ctx.upstream_seconds = outcome.route, outcome.upstream_seconds
        await send_bytes(send, outcome.body, route_headers(outcome.model, outcome.route))
    else:
        ctx.replayed = True
        await send_reply(send, outcome.reply)


HANDLERS = [create_embeddings]
