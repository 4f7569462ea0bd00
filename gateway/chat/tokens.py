"""Counting a prompt's tokens before sending it (the Messages API's `count_tokens`).

The model resolves as for a call (`auto` to the first route its policy gives whose breaker
lets calls through). A provider that counts in the client's dialect is asked (Anthropic's
`count_tokens`, free upstream); for any other the gateway's own estimate is the answer: the
prompt's bytes / 4, the estimate its token reservations use. Nothing is charged.
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway.auth import Caller
from gateway.billing.pricing import estimate_prompt_tokens
from gateway.routing.resolver import Router
from gateway.routing.upstream_errors import as_gateway_error
from providers.errors import ProviderError

__all__ = ["CountRequest", "TokenCounter", "count_tokens"]


class TokenCounter(Protocol):
    async def count_tokens(self, body: dict[str, Any]) -> dict[str, Any]: ...


class CountRequest(Protocol):
    """A count request in the client's dialect."""

    def upstream(self, provider: object) -> TokenCounter | None:
        """`provider` as it counts in the dialect, None when it does not."""
        ...

    def count_body(self, upstream_model: str) -> dict[str, Any]:
        """The client's body, with the upstream model."""
        ...


async def count_tokens(
    router: Router, caller: Caller, model: str, request: CountRequest, prompt_bytes: int
) -> tuple[int, str]:
    """The prompt's input tokens, and the model they were counted for."""
    route = router.resolve(model, caller.tenant, "chat")
    counter = request.upstream(route.provider)
    if counter is None:
        return estimate_prompt_tokens(prompt_bytes), route.model.id
    try:
        answer = await counter.count_tokens(request.count_body(route.model.upstream_model))
    except ProviderError as exc:
        route.scrub(exc)
        error = as_gateway_error(exc)
        error.model = route.model.id
        raise error from exc
    return int(answer["input_tokens"]), route.model.id
