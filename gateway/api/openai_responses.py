"""POST /v1/responses and /v1/responses/input_tokens: OpenAI's Responses API in front of the
gateway, for the openai SDKs' `client.responses`, the OpenAI Agents SDK and Codex CLI
(base URL = the gateway's `/v1`).

The body is decoded and translated into the chat service's request
(`gateway.http.openai_responses.request`), and the call is the chat service's like any other
(routing, fallbacks, the hold and the charge, Idempotency-Key, rate limits, the dialect
`responses` as the metrics' and log line's label); the answer is the `response` object or its
event stream (`gateway.http.openai_responses`). A route whose provider speaks the Responses
API (OpenAI, Azure OpenAI) gets the body as sent (`native.ResponsesCall`); on any other,
built-in tools are left out of the offer and named in `x-gateway-dropped-tools` and the log
line. Errors are the gateway's envelope, OpenAI's shape, as on the chat endpoint.

The gateway keeps the responses itself, per tenant, on every route (passthrough ones too:
`gateway.http.openai_responses.state`): `store` (true unless false) keeps a response before
its client gets it whole, `previous_response_id` continues from a kept one on any upstream,
and `GET`, `DELETE /v1/responses/{id}` and `GET /v1/responses/{id}/input_items` serve them
(404 `not_found` for an id the tenant has not stored).

None of these paths is in the OpenAPI document: it is OpenAI's API, described by OpenAI's own
reference (docs/api.md lists how the gateway differs from it).
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Response, asgi, delete, get
from litestar.enums import MediaType
from litestar.params import Parameter

from gateway.api.dependencies import authenticate, count_refused
from gateway.api.query import page_limit
from gateway.api.resources import Resources
from gateway.api.responses import route_headers, send_bytes, send_reply
from gateway.auth import Caller
from gateway.chat.inputs import inventory_of
from gateway.chat.outcomes import ChatCompleted, ChatReplayed
from gateway.chat.tokens import count_tokens
from gateway.errors import (
    ErrorDetail,
    GatewayError,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    ValidationFailed,
    fields_message,
)
from gateway.http.context import RequestContext, context_of
from gateway.http.event_stream import send_event_stream
from gateway.http.json_body import read_body, require_json_content_type
from gateway.http.openai_responses.dialect import RESPONSES_DIALECT, OpenAIResponses
from gateway.http.openai_responses.native import ResponsesCall
from gateway.http.openai_responses.request import (
    client_field,
    decode_input_tokens,
    decode_responses,
    to_chat_request,
)
from gateway.http.openai_responses.state import ResponseState

__all__ = ["DROPPED_TOOLS_HEADER", "HANDLERS", "create_response", "input_tokens"]

DROPPED_TOOLS_HEADER = "x-gateway-dropped-tools"
_encode = msgspec.json.Encoder().encode
_UNDOCUMENTED = {"include_in_schema": False}


def _start(scope: Any, *methods: str) -> tuple[RequestContext, Resources]:
    ctx = context_of(scope)
    ctx.dialect = RESPONSES_DIALECT
    if scope["method"] not in methods:
        raise MethodNotAllowed()
    resources: Resources = scope["app"].state.resources
    return ctx, resources


@asgi("/v1/responses", copy_scope=False, opt=_UNDOCUMENTED)
async def create_response(scope: Any, receive: Any, send: Any) -> None:
    ctx, resources = _start(scope, "POST")
    caller = await authenticate(ctx, resources)
    try:
        require_json_content_type(ctx.content_type)
        body = await read_body(receive, resources.config.file.gateway.max_body_bytes)
        request, raw = decode_responses(body)
        state = ResponseState(resources.store, caller.tenant.name, request)
        await state.load()
        request, raw = state.continued(request, raw)
        # The hold bounds what the upstream is sent: the earlier turns a stored response adds too.
        body_size = len(body) if state.previous_id is None else len(_encode(raw))
        translation = to_chat_request(request)
        translation.echo["previous_response_id"] = state.previous_id
        try:
            native = ResponsesCall(
                raw,
                translation.problems,
                inventory_of(translation.chat),
                on_end=state.answered,
                previous_id=state.previous_id,
            )
            outcome = await resources.chat.handle(
                caller,
                translation.chat,
                body_size=body_size,
                dialect=OpenAIResponses(translation, on_end=state.answered),
                request_id=ctx.request_id,
                idempotency_key=ctx.idempotency_key,
                native=native,
            )
        except InvalidRequest as exc:
            _in_client_terms(exc)
            raise
    except GatewayError as exc:
        await count_refused(ctx, resources, caller, exc)
        raise
    extra: list[tuple[bytes, bytes]] = []
    if translation.dropped and not native.passed_through:
        ctx.dropped_tools = ",".join(translation.dropped)
        extra.append((DROPPED_TOOLS_HEADER.encode(), ctx.dropped_tools.encode()))
    ctx.model = outcome.model
    ctx.rate = outcome.rate
    if isinstance(outcome, ChatCompleted):
        ctx.routing, ctx.upstream_seconds = outcome.route, outcome.upstream_seconds
        await state.kept(outcome.body)
        await send_bytes(
            send,
            outcome.body,
            [*route_headers(outcome.model, outcome.route, outcome.max_tokens), *extra],
        )
    elif isinstance(outcome, ChatReplayed):
        ctx.replayed = True
        await send_reply(send, outcome.reply, extra)
    else:
        ctx.routing, ctx.upstream_seconds = outcome.route, outcome.upstream_seconds
        headers = [*route_headers(outcome.model, outcome.route, outcome.max_tokens), *extra]
        await send_event_stream(scope, state.keeping(outcome.events), receive, send, headers)


class _Estimate:
    """An input_tokens request (`gateway.chat.tokens.CountRequest`): no upstream counts in
    this dialect, so the count is the gateway's estimate, as `count_tokens` makes it for
    upstreams that cannot count."""

    def upstream(self, provider: object) -> None:
        return None

    def count_body(self, upstream_model: str) -> dict[str, Any]:
        return {"model": upstream_model}


@asgi("/v1/responses/input_tokens", copy_scope=False, opt=_UNDOCUMENTED)
async def input_tokens(scope: Any, receive: Any, send: Any) -> None:
    ctx, resources = _start(scope, "POST")
    caller = await authenticate(ctx, resources)
    ctx.rate = await resources.gatekeeper.check(caller, ctx.request_id)
    require_json_content_type(ctx.content_type)
    body = await read_body(receive, resources.config.file.gateway.max_body_bytes)
    request = decode_input_tokens(body)
    tokens, model = await count_tokens(
        resources.router, caller, request.model, _Estimate(), len(body)
    )
    ctx.model = model
    await send_bytes(send, _encode({"object": "response.input_tokens", "input_tokens": tokens}))


def _in_client_terms(error: InvalidRequest) -> None:
    """A refusal of the chat request's rules names the fields as the client wrote them."""
    if error.details:
        for detail in error.details:
            detail.field = client_field(detail.field)
        error.message = fields_message(error.details)


def _not_stored(response_id: str) -> NotFound:
    return NotFound(f"No response with id {response_id!r} is stored.")


@get("/v1/responses/{response_id:str}", include_in_schema=False)
async def get_response(caller: Caller, resources: Resources, response_id: str) -> Response[bytes]:
    record = await resources.store.get_response(caller.tenant.name, response_id)
    if record is None:
        raise _not_stored(response_id)
    return Response(record.response, media_type=MediaType.JSON)


@delete("/v1/responses/{response_id:str}", include_in_schema=False, status_code=200)
async def delete_response(caller: Caller, resources: Resources, response_id: str) -> dict[str, Any]:
    if not await resources.store.delete_response(caller.tenant.name, response_id):
        raise _not_stored(response_id)
    return {"id": response_id, "object": "response.deleted", "deleted": True}


@get("/v1/responses/{response_id:str}/input_items", include_in_schema=False)
async def list_input_items(
    caller: Caller,
    resources: Resources,
    response_id: str,
    limit: str = Parameter(query="limit", default="20"),
    after: str | None = Parameter(query="after", default=None),
    order: str = Parameter(query="order", default="desc"),
) -> dict[str, Any]:
    """OpenAI's list of a response's input items, newest first unless `order=asc`."""
    size = page_limit(limit, high=100)
    if order not in ("asc", "desc"):
        message = "one of asc, desc"
        raise ValidationFailed(
            f"order must be {message}.", details=[ErrorDetail(field="order", message=message)]
        )
    page = await resources.store.response_input_items(
        caller.tenant.name,
        response_id,
        limit=size,
        after=after or None,
        order="asc" if order == "asc" else "desc",
    )
    if page is None:
        raise _not_stored(response_id)
    data = page.data
    return {
        "object": "list",
        "data": data,
        "first_id": data[0].get("id") if data else None,
        "last_id": data[-1].get("id") if data else None,
        "has_more": page.has_more,
    }


HANDLERS = [create_response, delete_response, get_response, input_tokens, list_input_items]
