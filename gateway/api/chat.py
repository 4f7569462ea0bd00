"""POST /v1/chat/completions (Available): sync JSON or a Server-Sent Events stream.

The busiest endpoint is a plain ASGI handler: it reads the few headers the middleware took and
the body straight from ASGI, skipping the framework's per-request signature parsing, kwargs
and response handling (measured: ~12 % of a chat call's CPU). Errors still go through the
framework's exception middleware to the one envelope renderer.

The chat service returns an outcome (`gateway.chat.outcomes`); this renders it: the JSON body,
the replayed reply, or the event stream (`chat_stream.py`), each with `x-gateway-model` (the
model that answered) and `x-gateway-route` (how it was routed), and notes the model, the rate
state (for the x-ratelimit-* headers) and a replay on the request's context for the middleware.
"""

from __future__ import annotations

from typing import Any

from litestar import asgi

from gateway.api.dependencies import authenticate, count_refused
from gateway.api.openapi.doc import Content, OperationDoc, documented
from gateway.api.resources import Resources
from gateway.api.responses import route_headers, send_bytes, send_reply
from gateway.chat.outcomes import ChatCompleted, ChatReplayed
from gateway.errors import GatewayError, MethodNotAllowed
from gateway.http.chat_body import decode_chat_request
from gateway.http.context import context_of
from gateway.http.event_stream import send_event_stream
from gateway.http.json_body import read_body, require_json_content_type
from gateway.http.openai_sse import OPENAI_CHAT
from gateway.schemas.chat import ChatRequestBody
from gateway.schemas.chat_response import ChatCompletion, ChatCompletionChunk

__all__ = ["HANDLERS", "chat_completions"]

_EVENTS = Content(
    "text/event-stream",
    {
        "description": "With `stream: true`: `data: <chat.completion.chunk JSON>` events, each "
        "followed by a blank line, ending with `data: [DONE]`. A stream that breaks after it "
        "started ends with a `data:` event holding the error envelope and no `[DONE]`.",
    },
    events=ChatCompletionChunk,
)
_ROUTED = {"x-gateway-model": False, "x-gateway-route": False}
_UPSTREAM = {**_ROUTED, "Retry-After": False}
_DOC = OperationDoc(
    summary="Create a chat completion",
    tag="Chat",
    release="Available",
    method="POST",
    body=ChatRequestBody,
    example={"model": "auto", "messages": [{"role": "user", "content": "Say hello"}]},
    responses={200: (ChatCompletion, _EVENTS)},
    errors=(400, 402, 404, 409, 422, 502, 504),
    idempotent=True,
    tokens=True,
    headers={
        200: {
            "x-gateway-model": True,
            "x-gateway-route": True,
            "x-gateway-max-tokens": False,
            "Idempotent-Replayed": False,
        },
        400: _ROUTED,
        502: _UPSTREAM,
        503: _UPSTREAM,
        504: _UPSTREAM,
    },
    description="The OpenAI request and answer, synchronous (JSON) or streamed (`stream: "
    "true`, Server-Sent Events; also Available). `model` is `auto` or a model id you may "
    "use (else 404 `model_not_found`). An invalid body is 400 `invalid_request` with one "
    "`details[]` item per problem. A top-level field beyond OpenAI's (`top_k`, `min_p`, ... "
    "as vLLM takes them) goes to OpenAI and OpenAI-compatible upstreams as sent, is "
    "translated where the upstream has it (`top_k`), and is otherwise a 400 naming it; a "
    "failure before streaming starts is the JSON envelope, "
    "never a partial stream. Postpaid: a hold for the worst case is placed first (402 when "
    "the wallet cannot cover it), the charge is in `usage.credits`.",
)


@asgi("/v1/chat/completions", copy_scope=False, opt=documented(_DOC))
async def chat_completions(scope: Any, receive: Any, send: Any) -> None:
    if scope["method"] != "POST":
        raise MethodNotAllowed()
    resources: Resources = scope["app"].state.resources
    ctx = context_of(scope)
    ctx.dialect = OPENAI_CHAT.name
    caller = await authenticate(ctx, resources)
    try:
        require_json_content_type(ctx.content_type)
        body = await read_body(receive, resources.config.file.gateway.max_body_bytes)
        request, extensions = decode_chat_request(body)
        outcome = await resources.chat.handle(
            caller,
            request,
            body_size=len(body),
            dialect=OPENAI_CHAT,
            request_id=ctx.request_id,
            idempotency_key=ctx.idempotency_key,
            extensions=extensions,
        )
    except GatewayError as exc:
        await count_refused(ctx, resources, caller, exc)
        raise
    ctx.model = outcome.model
    ctx.rate = outcome.rate
    if isinstance(outcome, ChatCompleted):
        ctx.routing, ctx.upstream_seconds = outcome.route, outcome.upstream_seconds
        headers = route_headers(outcome.model, outcome.route, outcome.max_tokens)
        await send_bytes(send, outcome.body, headers)
    elif isinstance(outcome, ChatReplayed):
        ctx.replayed = True
        await send_reply(send, outcome.reply)  # it kept the model and route of its answer
    else:
        ctx.routing, ctx.upstream_seconds = outcome.route, outcome.upstream_seconds
        headers = route_headers(outcome.model, outcome.route, outcome.max_tokens)
        await send_event_stream(scope, outcome.events, receive, send, headers)


HANDLERS = [chat_completions]
