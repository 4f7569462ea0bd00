"""Model names in requests -> the routes a call may take (prices are billing's).

A model id is pinned: that model, or 404 `model_not_found` when the tenant may not use it.
`auto` follows the capability's policy (`gateway.routing.policy`): the routing file's
`[routing.auto]` chain (ordered) or its `[routing.policies.CAPABILITY]` (ordered or weighted,
with conditions and a price ceiling). Health is each upstream's circuit breaker
(`gateway.routing.breakers`), which the chat service feeds with what its calls meet; the
breakers run on the clock the router is given (tests move it instead of sleeping).
"""

from __future__ import annotations

import random

from gateway.clock import Clock, monotonic
from gateway.config.loader import GatewayConfig, Tenant
from gateway.config.schema import (
    CAPABILITIES,
    ModelEntry,
    PolicyCandidate,
    RoutingPolicy,
    RoutingSection,
)
from gateway.errors import InvalidRequest, ModelUnavailable, NotFound
from gateway.routing.breakers import Breakers, BreakerSettings, BreakerState
from gateway.routing.fallback import RetryPolicy
from gateway.routing.leases import Leases
from gateway.routing.policy import NO_NEEDS, Policy
from gateway.routing.route import Choice, Route
from gateway.routing.secrets import Scrubber, sinks_of

__all__ = ["NO_NEEDS", "Choice", "ModelNotFound", "Route", "Router"]

_NONE: dict[str, Choice] = {}


class ModelNotFound(NotFound):
    code = "model_not_found"


class Router:
    def __init__(
        self,
        config: GatewayConfig,
        providers: dict[str, object],
        *,
        clock: Clock = monotonic,
        rng: random.Random | None = None,
        breakers: Breakers | None = None,
        scrubber: Scrubber | None = None,
    ) -> None:
        """`breakers`: give the previous router's to keep the upstreams' state across a
        reload (their clock is then theirs); `rng` draws weighted orders and jitter;
        `scrubber`: the process's, which then watches these providers' credentials too."""
        routing = config.file.routing
        self._config = config
        self._rng = rng or random.Random()
        self._breakers = breakers or Breakers(clock)
        sinks = sinks_of(providers.values())
        if scrubber is None:
            scrubber = Scrubber(sinks=sinks)
        else:
            scrubber.watch(sinks)
        self.scrubber = scrubber
        """Masks upstream credentials in provider errors (see `Route.scrub`)."""
        self.leases = Leases()
        """Who uses these providers now (`Route.lease`): a reload closes them once none."""
        settings = BreakerSettings(
            failure_threshold=routing.breaker.failure_threshold,
            open_seconds=float(routing.breaker.open_seconds),
        )
        self._routes = {
            model.id: Route(
                model=model,
                provider=providers[model.provider],
                breaker=self._breakers.get(model.provider, settings),
                note=f"auto; picked={model.id}",
                scrubber=self.scrubber,
                leases=self.leases,
            )
            for model in config.models.values()
            if model.provider in providers
        }
        self._policies: dict[str, Policy] = {}
        self._pinned: dict[str, dict[str, Choice]] = {}
        for capability in CAPABILITIES:
            policy = self._policy(capability, routing)
            if policy is not None:
                self._policies[capability] = policy
            retry = policy.retry if policy is not None else RetryPolicy()
            self._pinned[capability] = {
                model_id: Choice((route,), True, retry)
                for model_id, route in self._routes.items()
                if route.model.serves(capability)
            }

    @property
    def rng(self) -> random.Random:
        """The random source of weighted orders and retry jitter (seed it in tests)."""
        return self._rng

    def choose(
        self, name: str, tenant: Tenant, capability: str, needs: frozenset[str] = NO_NEEDS
    ) -> Choice:
        """The routes a call of `tenant` for `name` may take, in order.

        ModelNotFound for a model that does not exist or the tenant may not use;
        InvalidRequest for one of another capability; ModelUnavailable when no model of
        `auto`'s policy suits the tenant and the request."""
        if name != "auto":
            choice = self._pinned.get(capability, _NONE).get(name)
            if choice is None or not tenant.may_use(name):
                raise self._not_served(name, tenant, capability)
            return choice
        policy = self._policies.get(capability)
        picked = policy.choose(tenant, needs, self._rng) if policy is not None else None
        if picked is None:
            raise ModelUnavailable(
                f"No {capability} model is available to 'auto' for this account and request."
            )
        return picked

    def resolve(
        self, name: str, tenant: Tenant, capability: str, needs: frozenset[str] = NO_NEEDS
    ) -> Route:
        """One route, for calls that do not fall back (media tasks, fixed at creation): the
        first of `auto`'s order whose upstream's breaker lets calls through (else the first)."""
        choice = self.choose(name, tenant, capability, needs)
        for route in choice.routes:
            if not route.breaker.refuses():
                return route
        return choice.routes[0]

    def uses_needs(self, capability: str) -> bool:
        """Whether `auto` for `capability` looks at what a request needs."""
        policy = self._policies.get(capability)
        return policy is not None and policy.uses_needs

    def auto_capabilities(self) -> list[str]:
        """The capabilities `auto` serves, in the usual order."""
        return list(self._policies)

    def route_of(self, model_id: str) -> Route:
        """The route of a model already resolved (a queued task's); ModelUnavailable when the
        model left the routing file since."""
        route = self._routes.get(model_id)
        if route is None:
            raise ModelUnavailable(f"The model '{model_id}' is no longer configured.")
        return route

    def breaker_states(self) -> dict[str, BreakerState]:
        """Each upstream's breaker (`closed`, `open`, `half_open`), by provider name."""
        return self._breakers.states()

    @property
    def breakers(self) -> Breakers:
        return self._breakers

    def visible_models(self, tenant: Tenant) -> list[ModelEntry]:
        return [m for m in self._config.models.values() if tenant.may_use(m.id)]

    def _not_served(self, name: str, tenant: Tenant, capability: str) -> Exception:
        route = self._routes.get(name)
        if route is None or not tenant.may_use(name):
            return ModelNotFound(
                f"The model '{name}' does not exist or you do not have access to it."
            )
        serves = " and ".join(route.model.capabilities)
        return InvalidRequest(f"The model '{name}' serves {serves}, not {capability}.")

    def _policy(self, capability: str, routing: RoutingSection) -> Policy | None:
        chain: list[str] | None = routing.auto.get(capability)  # type: ignore[call-overload]
        if chain is not None:
            entries = [PolicyCandidate(model=model_id) for model_id in chain]
            return Policy.compile(capability, entries, self._routes, retry=RetryPolicy())
        section: RoutingPolicy | None = routing.policies.get(capability)  # type: ignore[call-overload]
        if section is None:
            return None
        retry = RetryPolicy(
            max_attempts=section.max_attempts,
            backoff_seconds=section.backoff_ms / 1000,
            max_retry_after_seconds=section.max_retry_after_ms / 1000,
        )
        return Policy.compile(
            capability,
            section.candidates,
            self._routes,
            weighted=section.strategy == "weighted",
            max_price=section.max_price,
            retry=retry,
        )
