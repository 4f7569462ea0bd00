"""One capability's `auto` policy, compiled once from the routing file: who may answer a given
request, and in which order.

A candidate is passed over when the tenant may not use its model, when the request needs what
the model lacks (`features`), when its `when` condition does not match the request, or when it
costs more than the policy's `max_price` (for images, at the request's quality). What a request
needs is a set of `FEATURES` names (`tools`, `json_output`, `vision`, `hd`); the caller works
it out only when the policy looks at it (`uses_needs`).

`ordered` keeps the file's order. `weighted` draws a fresh order per request: the first pick
is a candidate with probability weight / total, then the next among the rest, and so on
(Efraimidis-Spirakis keys), so every candidate is still a fallback for the others.

The resulting `Choice` is cached per distinct order, so a request allocates nothing when it
gets one seen before.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from gateway.config.loader import Tenant
from gateway.config.schema import IMAGE_QUALITIES, PolicyCandidate, When, ceiling_price
from gateway.routing.fallback import RetryPolicy
from gateway.routing.route import Choice, Route

__all__ = ["NO_NEEDS", "Candidate", "Policy"]

NO_NEEDS: frozenset[str] = frozenset()
_CACHE_LIMIT = 512


@dataclass(frozen=True, slots=True)
class Candidate:
    route: Route
    weight: int = 1
    required: frozenset[str] = NO_NEEDS
    """Needs the request must have (`when` true; an image model affordable only at hd)."""
    forbidden: frozenset[str] = NO_NEEDS
    """Needs the request must not have (`when` false; hd over the price ceiling)."""
    supports: frozenset[str] | None = None
    """The model's `features`; None: everything."""

    def accepts(self, needs: frozenset[str]) -> bool:
        if self.supports is not None and not needs <= self.supports:
            return False
        return self.required <= needs and not (self.forbidden & needs)

    @property
    def conditional(self) -> bool:
        return bool(self.required or self.forbidden) or self.supports is not None


class Policy:
    def __init__(
        self, candidates: Sequence[Candidate], *, weighted: bool, retry: RetryPolicy
    ) -> None:
        self._candidates = tuple(candidates)
        self._weighted = weighted and len(self._candidates) > 1
        self.retry = retry
        self.uses_needs = any(c.conditional for c in self._candidates)
        self._everyone = Choice(tuple(c.route for c in self._candidates), False, retry)
        self._plain = not self._weighted and not self.uses_needs
        self._cache: dict[tuple[str, ...], Choice] = {}

    @classmethod
    def compile(
        cls,
        capability: str,
        entries: Sequence[PolicyCandidate],
        routes: dict[str, Route],
        *,
        weighted: bool = False,
        max_price: Decimal | None = None,
        retry: RetryPolicy,
    ) -> Policy:
        """The candidates whose models have a provider here, within the price ceiling."""
        candidates = []
        for entry in entries:
            route = routes.get(entry.model)
            if route is None:
                continue
            required, forbidden = _condition(entry.when)
            if max_price is not None:
                affordable = {
                    q
                    for q in IMAGE_QUALITIES
                    if ceiling_price(route.model, capability, q) <= max_price
                }
                if not affordable:
                    continue
                if capability.endswith("_to_image"):
                    if "hd" not in affordable:
                        forbidden |= {"hd"}
                    if "standard" not in affordable:
                        required |= {"hd"}
            features = route.model.features
            candidates.append(
                Candidate(
                    route=route,
                    weight=entry.weight or 1,
                    required=required,
                    forbidden=forbidden,
                    supports=None if features is None else frozenset(features),
                )
            )
        return cls(candidates, weighted=weighted, retry=retry)

    def choose(self, tenant: Tenant, needs: frozenset[str], rng: random.Random) -> Choice | None:
        """The routes for a request of `tenant` needing `needs`; None when none qualifies."""
        if self._plain and tenant.allowed_models is None:
            return self._everyone if self._candidates else None
        picked = [
            c for c in self._candidates if tenant.may_use(c.route.model.id) and c.accepts(needs)
        ]
        if not picked:
            return None
        if self._weighted and len(picked) > 1:
            keys = {id(c): rng.random() ** (1.0 / c.weight) for c in picked}
            picked.sort(key=lambda c: keys[id(c)], reverse=True)
        key = tuple(c.route.model.id for c in picked)
        choice = self._cache.get(key)
        if choice is None:
            choice = Choice(tuple(c.route for c in picked), False, self.retry)
            if len(self._cache) < _CACHE_LIMIT:
                self._cache[key] = choice
        return choice


def _condition(when: When) -> tuple[frozenset[str], frozenset[str]]:
    required: set[str] = set()
    forbidden: set[str] = set()
    for need, wanted in (
        ("tools", when.tools),
        ("json_output", when.json_output),
        ("vision", when.vision),
        ("hd", None if when.quality is None else when.quality == "hd"),
    ):
        if wanted is True:
            required.add(need)
        elif wanted is False:
            forbidden.add(need)
    return frozenset(required), frozenset(forbidden)
