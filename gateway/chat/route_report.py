"""How a chat call's routing is reported: the `x-gateway-route` note of an answer, and the
refusal of a call whose every route's breaker is open (the rest is `gateway.routing.report`)."""

from __future__ import annotations

from gateway.chat.plan import ChatPlan
from gateway.routing.fallback import RouteNote, route_note
from gateway.routing.report import PINNED, all_open
from gateway.routing.resolver import Route

__all__ = ["refuse_if_all_open", "route_taken"]


def route_taken(plan: ChatPlan, route: Route, failed: list[RouteNote]) -> str:
    """The note of a call `route` answered, after the routes in `failed`."""
    if failed:
        return route_note(plan.choice.pinned, route.model.id, failed)
    return PINNED if plan.choice.pinned else route.note


def refuse_if_all_open(plan: ChatPlan) -> None:
    """Before admission: every route's breaker refuses calls, so nothing would be tried."""
    if all(route.breaker.refuses() for route in plan.routes):
        failed = [RouteNote(route.model.id, "breaker_open") for route in plan.routes]
        raise all_open(plan.choice, failed, plan.routes)
