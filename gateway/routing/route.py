"""What resolving a model name gives: a `Route` (a model, its provider and the provider's
breaker) and a `Choice` (the routes a call may try, in order, and how it retries)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.config.schema import ModelEntry
from gateway.routing.breakers import Breaker
from gateway.routing.fallback import RetryPolicy
from gateway.routing.leases import Lease, Leases
from gateway.routing.secrets import Scrubber
from providers.base import ChatProvider

__all__ = ["Choice", "Route"]


@dataclass(frozen=True, slots=True)
class Route:
    """A model and its provider. `provider` implements the protocol of every capability the
    model serves (`providers.base`)."""

    model: ModelEntry
    provider: Any
    breaker: Breaker
    note: str = field(default="", compare=False)
    """`x-gateway-route` when `auto` picked this model and it answered at once."""
    scrubber: Scrubber = field(default_factory=Scrubber, compare=False, repr=False)
    """Masks the gateway's upstream credentials in what a failed call reports."""
    leases: Leases = field(default_factory=Leases, compare=False, repr=False)
    """The leases of the generation of providers this route belongs to (its router's)."""

    def scrub(self, exc: BaseException) -> None:
        """Call first where a provider error is caught: its message may quote a credential."""
        self.scrubber.error(exc)

    def lease(self) -> Lease:
        """Keep the provider open until the lease is let go (a reload closes it after)."""
        return self.leases.take()

    @property
    def chat(self) -> ChatProvider:
        provider: ChatProvider = self.provider
        return provider


@dataclass(frozen=True, slots=True, eq=False)
class Choice:
    """The routes of one request, in the order to try them. The router keeps and reuses these
    (compared by identity), so a caller may cache what it derives from one."""

    routes: tuple[Route, ...]
    pinned: bool
    retry: RetryPolicy
