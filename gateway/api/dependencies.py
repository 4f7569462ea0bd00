"""Dependencies every controller shares: the opened resources and the authenticated caller."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.datastructures import State

from gateway.api.resources import Resources
from gateway.auth import Caller
from gateway.errors import GatewayError, OutcomeUnknown, StoreUnavailable
from gateway.http.context import RequestContext, context_of

__all__ = ["authenticate", "count_refused", "provide_caller", "provide_resources"]


def provide_resources(state: State) -> Resources:
    resources: Resources = state.resources
    return resources


async def authenticate(ctx: RequestContext, resources: Resources) -> Caller:
    """The caller of the request's Bearer key (taken by the middleware), noted for the log."""
    caller = await resources.auth.authenticate(ctx.authorization)
    ctx.tenant = caller.tenant.name
    return caller


async def provide_caller(request: Request[Any, Any, Any], resources: Resources) -> Caller:
    """Authenticated and counted against requests-per-minute."""
    ctx = context_of(request.scope)
    caller = await authenticate(ctx, resources)
    ctx.rate = await resources.gatekeeper.check(caller, ctx.request_id)
    return caller


async def count_refused(
    ctx: RequestContext, resources: Resources, caller: Caller, error: GatewayError
) -> None:
    """Counts a refused call against its key's requests per minute, unless its admission did
    (the error then carries the rate state): the chat and create endpoints count a call in
    their admission's one store step, so a call refused before it (an unknown model, an
    invalid body) takes its slot here, and every authenticated request counts whatever its
    answer. With no slot left this raises the 429 in the refusal's place; with the store
    down, the refusal stands as it is."""
    if error.rate is not None or isinstance(error, (StoreUnavailable, OutcomeUnknown)):
        return
    try:
        error.rate = await resources.gatekeeper.check(caller, ctx.request_id)
    except StoreUnavailable:
        return
