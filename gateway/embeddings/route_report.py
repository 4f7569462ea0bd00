"""How an embeddings call's failures are reported: the 402 in its own words, the error of a
call no route answered (or whose every breaker is open) with its `x-gateway-route` note, and
the log line of each upstream that failed on the way (as chat reports its own)."""

from __future__ import annotations

import math

from gateway.errors import ErrorDetail, GatewayError, InsufficientCredits, ModelUnavailable
from gateway.logging import get_logger
from gateway.routing.fallback import RouteNote, route_note
from gateway.routing.resolver import Choice, Route
from gateway.routing.upstream_errors import as_gateway_error
from providers.errors import ProviderError

__all__ = ["PINNED", "all_open", "call_failure", "log_upstream_failure", "too_poor"]

PINNED = "pinned"
_log = get_logger("gateway.embeddings")


def too_poor(refused: InsufficientCredits) -> InsufficientCredits:
    """The 402 in an embeddings call's words: what its hold is made of, and how to need less
    (the gatekeeper's speaks of completion tokens, which embeddings do not have)."""
    amounts = {d.field: d.message for d in refused.details or [] if d.field.endswith("_credits")}
    needed, available = amounts.get("hold_credits", "?"), amounts.get("available_credits", "?")
    error = InsufficientCredits(
        f"This call needs a hold of {needed} credits and the wallet has {available} available. "
        "The hold prices the input's token bound (a text's UTF-8 bytes, a token array's "
        "length) at the model's input price: send fewer or shorter inputs, or add credits.",
        details=[
            ErrorDetail(field="hold_credits", message=needed),
            ErrorDetail(field="available_credits", message=available),
            ErrorDetail(field="input", message="send fewer or shorter inputs to hold less"),
        ],
    )
    error.rate = refused.rate
    return error


def call_failure(
    exc: Exception, choice: Choice, route: Route, failed: list[RouteNote], *, answered: bool
) -> GatewayError:
    error = as_gateway_error(exc)
    error.model = route.model.id
    if failed:
        error.route = route_note(choice.pinned, route.model.id if answered else None, failed)
    else:
        error.route = PINNED if choice.pinned else route.note
    return error


def all_open(choice: Choice, failed: list[RouteNote]) -> ModelUnavailable:
    routes = choice.routes
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
