"""From a validated request to what the call needs: the routes it may try, the upstream body of
each, and one worst case (hold and token reservation) that covers whichever of them answers.

The first route's body is built here; a fallback's is built again from the request when it is
needed (`ChatPlan.body_for`), so a call that succeeds at once pays for one body only.
`model_options.<namespace>` goes into the body of the routes whose model takes that namespace,
and only theirs. The client's extension fields (top-level fields beyond the request's) go into
every body as sent, and keep the call to the routes whose provider takes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

import msgspec
from msgspec import UNSET

from gateway.billing.pricing import ChatPrice, estimate_prompt_tokens, prompt_token_bound
from gateway.chat.dialect import NativeRequest
from gateway.errors import ErrorDetail, InvalidRequest, fields_message
from gateway.routing.options import namespace_problems
from gateway.routing.route import Choice, Route
from gateway.schemas.chat import ChatRequest
from providers.base import extensions_refused

__all__ = [
    "MIN_HELD_OUTPUT_TOKENS",
    "ChatPlan",
    "HoldBound",
    "chat_needs",
    "keep_native_routes",
    "limit_field",
    "options_problems",
    "plan_call",
]

MIN_HELD_OUTPUT_TOKENS = 256
"""The output tokens (per choice) a wallet-bounded hold always covers: a wallet that cannot
pay the prompt and this many is refused (402), one that can is held all it has and the
upstream is asked for as many output tokens as that pays (`ChatPlan.min_hold_units`)."""
_MILLION = Decimal(1_000_000)
_JSON_FORMATS = ("json_object", "json_schema")
_REQUEST_FIELDS = frozenset(ChatRequest.__struct_fields__)


@dataclass(frozen=True, slots=True)
class HoldBound:
    """What sizes the hold of a call over several routes: per token, the dearest of their
    prices; the largest and smallest output limit. For one route, exactly its own."""

    price: ChatPrice
    max_output_tokens: int
    min_output_tokens: int

    @classmethod
    def over(cls, routes: tuple[Route, ...], prices: list[ChatPrice]) -> HoldBound:
        limits = [route.model.max_output_tokens for route in routes]
        if len(prices) == 1:
            price = prices[0]
        else:
            price = ChatPrice(
                input_units_per_mtok=max(p.input_units_per_mtok for p in prices),
                cached_input_units_per_mtok=max(p.cached_input_units_per_mtok for p in prices),
                output_units_per_mtok=max(p.output_units_per_mtok for p in prices),
                cache_write_units_per_mtok=max(
                    p.cache_write_units_per_mtok or p.input_units_per_mtok for p in prices
                ),
            )
        return cls(price=price, max_output_tokens=max(limits), min_output_tokens=min(limits))


@dataclass(slots=True)
class ChatPlan:
    """Not frozen: a frozen dataclass sets each field through `object.__setattr__`, which
    costs a microsecond per call on this path."""

    request: ChatRequest
    choice: Choice
    routes: tuple[Route, ...]
    """The choice's routes that can serve the requested completion size, in order."""
    upstream_body: dict[str, Any]
    """The first route's body (given to one call only: an adapter may keep it)."""
    stream: bool
    include_usage: bool
    requested: int | None
    """The output tokens asked (per choice): the client's, or on a dialect that lowers it to
    the models' limits (`plan_call`'s `lower_to_limit`), the largest of them."""
    tokens_reserved: int
    hold_units: int
    legacy_answer: bool = False
    """The client called with legacy `functions`: answer with `function_call`."""
    extensions: Mapping[str, Any] | None = None
    """The client's extension fields, as sent."""
    completion_tokens: int = 0
    """The output tokens per choice that `hold_units` covers."""
    choices: int = 1
    output_units_per_mtok: Decimal = Decimal(0)
    """The output price the hold is sized with (the dearest of the routes')."""
    paid_tokens: int | None = None
    """The output tokens per choice a wallet-bounded hold pays for, when it is smaller than
    `hold_units` (`hold_granted`); None: the whole hold was granted."""

    def body_for(self, route: Route) -> dict[str, Any]:
        """A fresh upstream body for `route` (a fallback)."""
        return _body(self.request, route, self.max_tokens_for(route), self.extensions)

    def max_tokens_for(self, route: Route) -> int:
        """The output limit (per choice) `route` is sent: what was asked, never more than the
        route's limit nor what the hold pays for."""
        limit = route.model.max_output_tokens
        tokens = min(self.requested or limit, limit)
        paid = self.paid_tokens
        return tokens if paid is None else min(tokens, paid)

    def lowered_for(self, route: Route) -> int | None:
        """`max_tokens_for(route)` when it is below what the client asked (its own field, or
        the route's limit when it sent none), else None: `x-gateway-max-tokens`."""
        sent = self.max_tokens_for(route)
        asked = _requested(self.request) or route.model.max_output_tokens
        return sent if sent < asked else None

    def min_hold_units(self) -> int:
        """The hold of the prompt and the first `MIN_HELD_OUTPUT_TOKENS` output tokens per
        choice: the full hold less the output it leaves out (rounded so that it still covers
        what it keeps). Equal to `hold_units` when the call asks no more than that."""
        left_out = self.completion_tokens - min(self.completion_tokens, MIN_HELD_OUTPUT_TOKENS)
        if left_out == 0:
            return self.hold_units
        cost = Decimal(left_out * self.choices) * self.output_units_per_mtok
        return self.hold_units - int(cost // _MILLION)  # rounded down: the rest stays held

    def min_tokens_reserved(self) -> int:
        """The token reservation that goes with `min_hold_units`."""
        left_out = self.completion_tokens - min(self.completion_tokens, MIN_HELD_OUTPUT_TOKENS)
        return self.tokens_reserved - left_out * self.choices

    def hold_granted(self, granted: int) -> None:
        """Admission held `granted` units: when that is less than `hold_units`, `paid_tokens`
        becomes the output tokens per choice it pays for, and the first body asks no more.
        The prompt's part of any hold is at most `hold_units` less the price of the whole
        `completion_tokens`, so `completion_tokens` less ceil((hold_units - granted) / the
        price of a token per choice) is paid for, however the prompt was bounded."""
        price = self.output_units_per_mtok
        if granted >= self.hold_units or price <= 0:
            return
        short = Decimal(self.hold_units - granted) * _MILLION / (price * self.choices)
        paid = self.completion_tokens - int(short.to_integral_value(rounding=ROUND_CEILING))
        self.paid_tokens = paid
        body = self.upstream_body
        body["max_completion_tokens"] = min(body["max_completion_tokens"], paid)


def plan_call(
    request: ChatRequest,
    choice: Choice,
    bound: HoldBound,
    body_size: int,
    *,
    legacy_answer: bool = False,
    extensions: Mapping[str, Any] | None = None,
    lower_to_limit: bool = False,
) -> ChatPlan:
    """`bound` covers `choice.routes`; routes whose provider does not take the client's
    `extensions` are left out (all of them: 400 naming each field the first route does not
    take), and so are routes whose output limit is below the request's `max_completion_tokens`
    (or `max_tokens`). When that leaves none: 400 naming the field the client sent, or with
    `lower_to_limit` (the client's dialect lowers it, see `ChatDialect.lowers_max_tokens`)
    every route is kept and asked for its own limit."""
    requested = _requested(request)
    routes = choice.routes
    if extensions:
        routes = _taking(routes, extensions)
    if requested is not None and requested > bound.min_output_tokens:
        fitting = tuple(r for r in routes if r.model.max_output_tokens >= requested)
        if fitting:
            routes = fitting
            bound = HoldBound.over(routes, [bound.price])
        elif lower_to_limit:
            requested = bound.max_output_tokens
        else:
            raise _over_limit(request, requested, bound)
    limit = routes[0].model.max_output_tokens
    body = _body(request, routes[0], min(requested or limit, limit), extensions)
    stream = "stream" in body
    options = request.stream_options
    include_usage = bool(stream and options and options.include_usage)
    completion_bound = (requested or bound.max_output_tokens) * (body.get("n") or 1)
    return ChatPlan(
        request=request,
        choice=choice,
        routes=routes,
        completion_tokens=requested or bound.max_output_tokens,
        choices=body.get("n") or 1,
        output_units_per_mtok=bound.price.output_units_per_mtok,
        upstream_body=body,
        stream=stream,
        include_usage=include_usage,
        requested=requested,
        tokens_reserved=estimate_prompt_tokens(body_size) + completion_bound,
        hold_units=bound.price.hold_units(prompt_token_bound(body_size), completion_bound),
        legacy_answer=legacy_answer,
        extensions=extensions or None,
    )


def _taking(routes: tuple[Route, ...], extensions: Mapping[str, Any]) -> tuple[Route, ...]:
    """The routes whose provider takes every extension field; with none, a 400 naming each
    field the first route's upstream does not take, as the client named it."""
    kept = tuple(
        r for r in routes if not extensions_refused(r.provider, r.model.upstream_model, extensions)
    )
    if kept:
        return kept
    first = routes[0]
    refused = extensions_refused(first.provider, first.model.upstream_model, extensions)
    problems = [
        ErrorDetail(field=name, message="not supported by this model's upstream")
        for name in refused
    ]
    raise InvalidRequest(fields_message(problems), details=problems)


def keep_native_routes(plan: ChatPlan, native: NativeRequest) -> None:
    """The request says what only an upstream of the client's dialect can carry: the plan
    keeps the routes whose provider speaks it; with none, a 400 naming each such field. (The
    hold, sized over all the routes, still covers the ones kept.)"""
    routes = tuple(r for r in plan.routes if native.upstream(r.provider) is not None)
    if not routes:
        problems = list(native.problems)
        raise InvalidRequest(fields_message(problems), details=problems)
    plan.routes = routes


def _over_limit(request: ChatRequest, requested: int, bound: HoldBound) -> InvalidRequest:
    detail = ErrorDetail(
        field=limit_field(request),
        message=f"is {requested}, more than this model's limit of {bound.max_output_tokens}",
    )
    return InvalidRequest(fields_message([detail]), details=[detail])


def limit_field(request: ChatRequest) -> str:
    """The request's output limit as the client named it (a Messages call's `max_tokens` is
    the chat request's `max_tokens`)."""
    return "max_tokens" if request.max_tokens is not UNSET else "max_completion_tokens"


def _requested(request: ChatRequest) -> int | None:
    """`max_tokens` (legacy) or `max_completion_tokens`; validation made them agree."""
    value = request.max_tokens or request.max_completion_tokens
    return value if isinstance(value, int) else None


def _body(
    request: ChatRequest,
    route: Route,
    max_tokens: int,
    extensions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = msgspec.to_builtins(request)
    if extensions:
        body.update(extensions)
    options = body.pop("model_options", None)
    body["model"] = route.model.upstream_model
    body.pop("max_tokens", None)
    body["max_completion_tokens"] = max_tokens
    if body.get("stream"):
        body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    else:
        body.pop("stream", None)
    if options:
        namespace = route.model.options_namespace
        if namespace and namespace in options:
            body.update(options[namespace])
    return body


def chat_needs(request: ChatRequest) -> frozenset[str]:
    """What the request needs of a model (`gateway.config.schema.FEATURES`)."""
    needs = set()
    if request.tools:
        needs.add("tools")
    response_format = request.response_format
    if response_format is not UNSET and response_format.get("type") in _JSON_FORMATS:
        needs.add("json_output")
    for message in request.messages:
        content = message.content
        if isinstance(content, list) and any(p.get("type") == "image_url" for p in content):
            needs.add("vision")
            break
    return frozenset(needs)


def options_problems(options: Mapping[str, Any], choice: Choice) -> list[ErrorDetail]:
    """`model_options` may hold the namespaces of the models the call may reach
    (`gateway.routing.options`), each an object of options that are not standard request
    fields (those go at the top level, where the gateway checks them)."""
    problems = namespace_problems(options, choice)
    for namespace, values in options.items():
        field = f"model_options.{namespace}"
        if any(p.field == field for p in problems):
            continue
        if not isinstance(values, dict):
            problems.append(ErrorDetail(field=field, message="must be an object of options"))
            continue
        problems += [
            ErrorDetail(
                field=f"{field}.{key}",
                message="is a standard request field; send it at the top level",
            )
            for key in values
            if key in _REQUEST_FIELDS
        ]
    return problems
