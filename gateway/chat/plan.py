"""From a validated request to what the call needs: the upstream body and its worst case."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from gateway.billing.pricing import ChatPrice, estimate_prompt_tokens, prompt_token_bound
from gateway.errors import InvalidRequest
from gateway.routing.resolver import Route
from gateway.schemas.chat import ChatRequest

__all__ = ["ChatPlan", "plan_call"]


@dataclass(frozen=True, slots=True)
class ChatPlan:
    upstream_body: dict[str, Any]
    stream: bool
    include_usage: bool
    tokens_reserved: int
    price: ChatPrice
    hold_units: int


def plan_call(request: ChatRequest, route: Route, price: ChatPrice, body_size: int) -> ChatPlan:
    body: dict[str, Any] = msgspec.to_builtins(request)
    body.pop("model_options", None)
    body["model"] = route.model.upstream_model
    limit = route.model.max_output_tokens
    requested = body.pop("max_tokens", None) or body.get("max_completion_tokens")
    if requested is not None and requested > limit:
        raise InvalidRequest(
            f"max_completion_tokens is {requested}, more than this model's limit of {limit}.",
        )
    max_completion = requested or limit
    body["max_completion_tokens"] = max_completion
    stream = bool(body.get("stream"))
    include_usage = False
    if stream:
        options = body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage"))
        body["stream_options"] = {**options, "include_usage": True}
    else:
        body.pop("stream", None)
    completion_bound = max_completion * (body.get("n") or 1)
    return ChatPlan(
        upstream_body=body,
        stream=stream,
        include_usage=include_usage,
        tokens_reserved=estimate_prompt_tokens(body_size) + completion_bound,
        price=price,
        hold_units=price.hold_units(prompt_token_bound(body_size), completion_bound),
    )
