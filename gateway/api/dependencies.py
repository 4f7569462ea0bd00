"""Dependencies every controller shares: the opened resources and the authenticated caller."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.datastructures import State

from gateway.auth import Caller
from gateway.context import context_of
from gateway.resources import Resources

__all__ = ["authenticate", "provide_caller", "provide_resources"]


def provide_resources(state: State) -> Resources:
    resources: Resources = state.resources
    return resources


async def authenticate(request: Request[Any, Any, Any], resources: Resources) -> Caller:
    ctx = context_of(request.scope)
    caller = await resources.auth.authenticate(ctx.authorization)
    ctx.tenant = caller.tenant.name
    return caller


async def provide_caller(request: Request[Any, Any, Any], resources: Resources) -> Caller:
    """Authenticated and counted against requests-per-minute."""
    caller = await authenticate(request, resources)
    await resources.gatekeeper.check(caller, context_of(request.scope))
    return caller
