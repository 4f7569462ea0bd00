"""How a call's routing is reported, whatever its capability: the error of a call that no route
answered (or whose every breaker is open) with its `x-gateway-route` note, and the log line of
each upstream that failed on the way."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gateway.errors import GatewayError, ModelUnavailable
from gateway.logging import get_logger
from gateway.routing.fallback import RouteNote, route_note
from gateway.routing.resolver import Choice, Route
from gateway.routing.upstream_errors import as_gateway_error
from providers.errors import ProviderError

__all__ = ["PINNED", "all_open", "annotated", "call_failure", "log_upstream_failure"]

PINNED = "pinned"
_log = get_logger("gateway.routing")


def call_failure(
    exc: Exception, choice: Choice, route: Route, failed: list[RouteNote], *, answered: bool
) -> GatewayError:
    """The error of a call no route answered (`answered` False), or whose route answered
    with a refusal (True): `route` is the last one tried."""
    error = as_gateway_error(exc)
    error.model = route.model.id
    if failed:
        answerer = route.model.id if answered else None
        error.route = route_note(choice.pinned, answerer, failed)
    else:
        error.route = PINNED if choice.pinned else route.note
    return error


def annotated(exc: Exception, choice: Choice, rate: object | None) -> GatewayError:
    """`exc` as the error a call is answered with (anything not a gateway error is a fault of
    the gateway's own: 500), naming the model asked for and the caller's rate-limit state."""
    error = as_gateway_error(exc)
    if error.model is None:
        error.model = choice.routes[0].model.id
    if rate is not None:
        error.rate = rate
    return error


def all_open(
    choice: Choice, failed: list[RouteNote], routes: Sequence[Route] | None = None
) -> ModelUnavailable:
    """503 for a call whose `routes` (the choice's by default) all have an open breaker."""
    routes = choice.routes if routes is None else routes
    wait = min(route.breaker.retry_in() for route in routes)
    if choice.pinned:
        message = (
            f"The model '{routes[0].model.id}' is unavailable: its upstream is failing. "
            "Retry later, or with 'auto'."
        )
    else:
        message = "Every model 'auto' may use is unavailable: their upstreams are failing."
    error = ModelUnavailable(message, headers={"Retry-After": str(max(1, math.ceil(wait)))})
    error.model = routes[0].model.id
    error.route = route_note(choice.pinned, None, failed)
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
