"""A call answered whole: its charge, and its body as the client reads it.

An answer in the service's format (a chat.completion) gets the gateway's id, model and usage
with credits, and the client's dialect renders it; an answer in the client's own dialect
(`gateway.chat.dialect.NativeRequest`) is charged from the counts its upstream reported and
given back as it came, with the gateway's id, model and credits. Either is kept as the
idempotent reply when the call has a key.
"""

from __future__ import annotations

import time
from decimal import Decimal

from gateway.billing.pricing import ChatPrice
from gateway.chat.dialect import ChatDialect, NativeRequest
from gateway.chat.outcomes import reply_headers
from gateway.chat.usage import Charge, charge_for, credit_fields, usage_fields
from gateway.routing.resolver import Route
from gateway.store.base import Call, StoredReply
from providers.base import ChatCompletion

__all__ = ["completion_answer", "kept_reply", "native_answer"]


def completion_answer(
    call: Call,
    route: Route,
    price: ChatPrice,
    credits_per_usd: Decimal,
    body_size: int,
    completion: ChatCompletion,
    dialect: ChatDialect,
) -> tuple[bytes, Charge]:
    body, usage = completion.body, completion.usage
    usage_body = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    charge = charge_for(price, usage, body_size=body_size, usage_body=usage_body)
    body["id"] = call.call_id
    body["model"] = route.model.id
    body["object"] = "chat.completion"
    body.setdefault("created", int(time.time()))
    body["usage"] = usage_fields(usage_body or {}, charge, credits_per_usd)
    return dialect.completion(body), charge


def native_answer(
    call: Call,
    route: Route,
    price: ChatPrice,
    credits_per_usd: Decimal,
    body_size: int,
    completion: ChatCompletion,
    native: NativeRequest,
) -> tuple[bytes, Charge]:
    charge = charge_for(price, completion.usage, body_size=body_size)
    body = completion.body
    body["id"] = call.call_id
    body["model"] = route.model.id
    return native.completion(body, credit_fields(charge, credits_per_usd)), charge


def kept_reply(
    call: Call, route: Route, note: str, payload: bytes, max_tokens: int | None
) -> StoredReply | None:
    """The reply a repeated Idempotency-Key replays (None without a key)."""
    if call.idempotency is None:
        return None
    return StoredReply(
        status=200,
        content_type="application/json",
        body=payload,
        headers=reply_headers(route.model.id, note, max_tokens),
    )
