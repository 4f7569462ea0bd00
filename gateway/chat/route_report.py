"""How a chat call's routing is reported: the `x-gateway-route` note of an answer, the error
of a call that no route answered (or whose every breaker is open), and the log line of each
upstream that failed on the way."""

from __future__ import annotations

import math

from gateway.chat.plan import ChatPlan
from gateway.errors import GatewayError, ModelUnavailable
from gateway.logging import get_logger
from gateway.routing.fallback import RouteNote, route_note
from gateway.routing.resolver import Route
from gateway.routing.upstream_errors import as_gateway_error
from providers.errors import ProviderError

__all__ = ["all_open", "call_failure", "log_upstream_failure", "refuse_if_all_open", "route_taken"]

_PINNED = "pinned"
_log = get_logger("gateway.chat")


def route_taken(plan: ChatPlan, route: Route, failed: list[RouteNote]) -> str:
    """The note of a call `route` answered, after the routes in `failed`."""
    if failed:
        return route_note(plan.choice.pinned, route.model.id, failed)
    return _PINNED if plan.choice.pinned else route.note


def call_failure(
    exc: Exception, plan: ChatPlan, route: Route, failed: list[RouteNote], *, answered: bool
) -> GatewayError:
    """The error of a call no route answered (`answered` False), or whose route answered
    with a refusal (True): `route` is the last one tried."""
    error = as_gateway_error(exc)
    error.model = route.model.id
    if failed:
        answerer = route.model.id if answered else None
        error.route = route_note(plan.choice.pinned, answerer, failed)
    else:
        error.route = _PINNED if plan.choice.pinned else route.note
    return error


def refuse_if_all_open(plan: ChatPlan) -> None:
    """Before admission: every route's breaker refuses calls, so nothing would be tried."""
    if all(route.breaker.refuses() for route in plan.routes):
        raise all_open(plan, [RouteNote(route.model.id, "breaker_open") for route in plan.routes])


def all_open(plan: ChatPlan, failed: list[RouteNote]) -> ModelUnavailable:
    routes = plan.routes
    wait = min(route.breaker.retry_in() for route in routes)
    if plan.choice.pinned:
        message = (
            f"The model '{routes[0].model.id}' is unavailable: its upstream is failing. "
            "Retry later, or with 'auto'."
        )
    else:
        message = "Every model 'auto' may use is unavailable: their upstreams are failing."
    error = ModelUnavailable(message, headers={"Retry-After": str(max(1, math.ceil(wait)))})
    error.model = routes[0].model.id
    error.route = route_note(plan.choice.pinned, None, failed)
    return error


def log_upstream_failure(route: Route, exc: Exception, *, fallback: bool) -> None:
    """`upstream_failed` (warning) for an upstream's own failure; `fallback`: another route
    is tried next."""
    if isinstance(exc, ProviderError):
        _log.warning(
            "upstream_failed",
            model=route.model.id,
            provider=route.model.provider,
            error=type(exc).__name__,
            upstream_status=exc.upstream_status,
            detail=exc.message,
            fallback=fallback,
        )
