"""POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API in front of the
gateway, for the Anthropic SDKs and Claude Code (`ANTHROPIC_BASE_URL` = the gateway's root).

The body is decoded into the chat service's request (`gateway.http.anthropic.request`) and
kept as sent: a route whose provider speaks the Messages API gets it untranslated
(`gateway.http.anthropic.dialect.MessagesCall`), any other the translation. The call is the
chat service's like any other (routing, fallbacks, the hold and the charge, Idempotency-Key,
rate limits); the outcome is rendered here, with Anthropic's `request-id` header beside
`x-request-id`. Errors on these paths are in Anthropic's shape
(`gateway.http.anthropic.errors`), set on the request's context for the one exception handler.

The key comes as `x-api-key` (the SDKs' default) or `Authorization: Bearer` (their
`auth_token`, Claude Code's `ANTHROPIC_AUTH_TOKEN`); both with different keys is refused as
ambiguous. `anthropic-version` and `anthropic-beta` are passed on to Anthropic upstreams. An
answer from another upstream names the fields that only tune Anthropic's behaviour, which that
upstream was sent the call without, in `x-gateway-dropped-fields` (and the log line's
`dropped_fields`).

Neither path is in the OpenAPI document: it is Anthropic's API, described by Anthropic's own
reference (docs/api.md lists how the gateway differs from it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from litestar import asgi

from gateway.api.dependencies import authenticate, count_refused
from gateway.api.resources import Resources
from gateway.api.responses import route_headers, send_bytes, send_reply
from gateway.auth import DUPLICATE, Caller
from gateway.chat.outcomes import ChatCompleted, ChatReplayed
from gateway.chat.tokens import count_tokens
from gateway.errors import GatewayError, InvalidApiKey, MethodNotAllowed
from gateway.http.anthropic.bounds import bound_messages
from gateway.http.anthropic.dialect import ANTHROPIC_MESSAGES, MessagesCall
from gateway.http.anthropic.documents import fetch_url_documents
from gateway.http.anthropic.errors import error_response
from gateway.http.anthropic.request import decode_messages, to_chat_request
from gateway.http.context import RequestContext, context_of
from gateway.http.event_stream import send_event_stream
from gateway.http.json_body import read_body, require_json_content_type
from gateway.schemas.messages import CountTokensRequest, MessagesRequest

__all__ = ["DROPPED_FIELDS_HEADER", "HANDLERS", "count_message_tokens", "messages"]

_encode = msgspec.json.Encoder().encode
_KEY_HINT = (
    "Missing or invalid API key. Send 'x-api-key: <API_KEY>' or 'Authorization: Bearer <API_KEY>'."
)
_UNDOCUMENTED = {"include_in_schema": False}
_PASSED_ON = (b"anthropic-version", b"anthropic-beta")
DROPPED_FIELDS_HEADER = b"x-gateway-dropped-fields"
"""The request's fields that only tune Anthropic's behaviour, which the upstream that answered
(not Anthropic's) was sent the call without: comma-separated, as the client named them."""


@dataclass(frozen=True, slots=True)
class _Headers:
    api_key: str | None
    upstream: dict[str, str]
    """`anthropic-version` and `anthropic-beta` as the client sent them (repeats joined)."""


def _headers(scope: Any) -> _Headers:
    api_key: str | None = None
    upstream: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name == b"x-api-key":
            api_key = DUPLICATE if api_key is not None else value.decode("latin-1")
        elif name in _PASSED_ON:
            key, text = name.decode(), value.decode("latin-1")
            upstream[key] = f"{upstream[key]},{text}" if key in upstream else text
    return _Headers(api_key=api_key, upstream=upstream)


async def _start(scope: Any) -> tuple[RequestContext, Resources, _Headers]:
    """The request's context set for this dialect (its errors in Anthropic's shape), and the
    caller authenticated by either way of sending a key."""
    ctx = context_of(scope)
    ctx.dialect = ANTHROPIC_MESSAGES.name
    ctx.render_error = error_response
    if scope["method"] != "POST":
        raise MethodNotAllowed()
    resources: Resources = scope["app"].state.resources
    headers = _headers(scope)
    key = headers.api_key
    if key is not None:
        if key is DUPLICATE:
            raise InvalidApiKey("Send exactly one x-api-key header.")
        bearer = f"Bearer {key}"
        if ctx.authorization is not None and ctx.authorization.strip() != bearer.strip():
            raise InvalidApiKey("Send one key: x-api-key and Authorization name different keys.")
        ctx.authorization = bearer
    elif ctx.authorization is None:
        raise InvalidApiKey(_KEY_HINT)
    return ctx, resources, headers


async def _caller(ctx: RequestContext, resources: Resources) -> Caller:
    """The key's caller; an unknown key is told both ways of sending one."""
    try:
        return await authenticate(ctx, resources)
    except InvalidApiKey as exc:
        if exc.message != InvalidApiKey.default_message:
            raise
        raise InvalidApiKey(_KEY_HINT) from None


@asgi("/v1/messages", copy_scope=False, opt=_UNDOCUMENTED)
async def messages(scope: Any, receive: Any, send: Any) -> None:
    ctx, resources, headers = await _start(scope)
    caller = await _caller(ctx, resources)
    try:
        require_json_content_type(ctx.content_type)
        body = await read_body(receive, resources.config.file.gateway.max_body_bytes)
        request, raw = decode_messages(body, MessagesRequest)
        translation = to_chat_request(request, raw)
        tenant, artifacts = caller.tenant.name, resources.artifacts

        async def fetch(url: str, field: str) -> bytes:
            return await artifacts.fetch_document(tenant, url, field=field)

        await fetch_url_documents(raw, fetch)
        native = MessagesCall(
            raw,
            headers.upstream,
            translation.problems,
            bound_messages(raw),
            dropped=translation.dropped,
        )
        outcome = await resources.chat.handle(
            caller,
            translation.request,
            body_size=len(body),
            dialect=ANTHROPIC_MESSAGES,
            request_id=ctx.request_id,
            idempotency_key=ctx.idempotency_key,
            native=native,
        )
    except GatewayError as exc:
        await count_refused(ctx, resources, caller, exc)
        raise
    ctx.model = outcome.model
    ctx.rate = outcome.rate
    extra = [(b"request-id", ctx.request_id.encode())]
    if isinstance(outcome, ChatReplayed):
        ctx.replayed = True
        await send_reply(send, outcome.reply, extra)
        return
    ctx.routing, ctx.upstream_seconds = outcome.route, outcome.upstream_seconds
    extra += route_headers(outcome.model, outcome.route, outcome.max_tokens)
    if outcome.dropped:
        ctx.dropped_fields = ",".join(outcome.dropped)
        extra.append((DROPPED_FIELDS_HEADER, ", ".join(outcome.dropped).encode()))
    if isinstance(outcome, ChatCompleted):
        await send_bytes(send, outcome.body, extra)
    else:
        await send_event_stream(scope, outcome.events, receive, send, extra)


@asgi("/v1/messages/count_tokens", copy_scope=False, opt=_UNDOCUMENTED)
async def count_message_tokens(scope: Any, receive: Any, send: Any) -> None:
    ctx, resources, headers = await _start(scope)
    caller = await _caller(ctx, resources)
    ctx.rate = await resources.gatekeeper.check(caller, ctx.request_id)
    require_json_content_type(ctx.content_type)
    body = await read_body(receive, resources.config.file.gateway.max_body_bytes)
    request, raw = decode_messages(body, CountTokensRequest)
    tokens, model = await count_tokens(
        resources.router, caller, request.model, MessagesCall(raw, headers.upstream), len(body)
    )
    ctx.model = model
    answer = _encode({"input_tokens": tokens})
    await send_bytes(send, answer, [(b"request-id", ctx.request_id.encode())])


HANDLERS = [messages, count_message_tokens]
