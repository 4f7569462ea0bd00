"""Model names in requests -> the model entry and its provider (prices are billing's).

`auto` walks the capability's chain in the routing file and takes the first model the tenant
may use whose provider is up. Health here is what the gateway has seen: a provider that just
answered "unavailable" or timed out is skipped for a short cool-down, measured on the
monotonic clock the router is given (tests move it instead of sleeping).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.config.loader import GatewayConfig, Tenant
from gateway.config.schema import ModelEntry
from gateway.errors import InvalidRequest, ModelUnavailable, NotFound
from providers.base import ChatProvider

__all__ = ["COOL_DOWN_SECONDS", "ModelNotFound", "Route", "Router"]

COOL_DOWN_SECONDS = 10.0
"""How long `auto` passes over a provider that just failed as unavailable."""


class ModelNotFound(NotFound):
    code = "model_not_found"


@dataclass(frozen=True, slots=True)
class Route:
    """A model and its provider. `provider` implements the protocol of every capability the
    model serves (`providers.base`)."""

    model: ModelEntry
    provider: Any

    @property
    def chat(self) -> ChatProvider:
        provider: ChatProvider = self.provider
        return provider


class Router:
    def __init__(
        self,
        config: GatewayConfig,
        providers: dict[str, Any],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._clock = clock
        self._routes = {
            model.id: Route(model=model, provider=providers[model.provider])
            for model in config.models.values()
            if model.provider in providers
        }
        self._down_until: dict[str, float] = {}

    def resolve(self, name: str, tenant: Tenant, capability: str) -> Route:
        if name == "auto":
            return self._auto(tenant, capability)
        route = self._routes.get(name)
        if route is None or not tenant.may_use(name):
            raise ModelNotFound(
                f"The model '{name}' does not exist or you do not have access to it."
            )
        if not route.model.serves(capability):
            serves = " and ".join(route.model.capabilities)
            raise InvalidRequest(f"The model '{name}' serves {serves}, not {capability}.")
        return route

    def route_of(self, model_id: str) -> Route:
        """The route of a model already resolved (a queued task's); ModelUnavailable when the
        model left the routing file since."""
        route = self._routes.get(model_id)
        if route is None:
            raise ModelUnavailable(f"The model '{model_id}' is no longer configured.")
        return route

    def _auto(self, tenant: Tenant, capability: str) -> Route:
        chain = self._config.file.routing.auto.get(capability, [])  # type: ignore[call-overload]
        candidates = [self._routes[m] for m in chain if m in self._routes and tenant.may_use(m)]
        if not candidates:
            raise ModelUnavailable(
                f"No {capability} model is available to 'auto' for this account."
            )
        now = self._clock()
        for route in candidates:
            if self._down_until.get(route.model.provider, 0.0) <= now:
                return route
        return candidates[0]

    def mark_down(self, route: Route) -> None:
        """The provider failed as unavailable: let `auto` prefer others for a moment."""
        self._down_until[route.model.provider] = self._clock() + COOL_DOWN_SECONDS

    def visible_models(self, tenant: Tenant) -> list[ModelEntry]:
        return [m for m in self._config.models.values() if tenant.may_use(m.id)]
