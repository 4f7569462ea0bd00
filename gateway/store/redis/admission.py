"""The Redis store's admission area: `admit`, `settle` and `release`, the request path.

Each is one script (`admit.lua`, `settle.lua`, `release.lua`) run through the store's
pipelined connection (`RedisStore._eval_hot`). The call's identity (`Call`) gives the keys,
all of its tenant (one hash slot): its API key's rate buckets, its tenant's holds and wallet,
its idempotency scope and its `done:{call_id}` marker, which makes the token reconcile happen
once and fences a late admission of a released call. A settlement that charges or keeps a
reply is durable: answered once the store's replicas have it (docs/store.md, "Failover").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.store.base import Admission, AdmissionResult, Release, Settlement
from gateway.store.ledger_ids import charge_id, hold_id
from gateway.store.redis.codec import admission_result, encode_reply
from gateway.store.redis.keys import RedisKeys

__all__ = ["DONE_TTL_SECONDS", "RedisAdmissionArea"]

DONE_TTL_SECONDS = 86_400
"""How long a settled/released call is remembered, so its tokens are reconciled only once (and
a call admitted with tokens, so that only its release gives them back)."""


class RedisAdmissionArea:
    """The request-path operations of `RedisStore` (a mixin: the store has the pipeline)."""

    keys: RedisKeys

    if TYPE_CHECKING:

        async def _eval_hot(
            self, name: str, keys: Sequence[str], args: Sequence[Any], *, durable: bool = False
        ) -> Any: ...

    async def admit(self, admission: Admission) -> AdmissionResult:
        k, call = self.keys, admission.call
        limits, claim, tenant, call_id = call.limits, call.idempotency, call.tenant, call.call_id
        res = await self._eval_hot(
            "admit",
            (
                k.rate(tenant, call.api_key_id),
                k.idempotency(tenant, claim.scope if claim else ""),
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.wallet(tenant),
                k.done(tenant, call_id),
            ),
            (
                limits.requests_per_minute,
                limits.tokens_per_minute,
                call.tokens_reserved,
                admission.hold_units,
                admission.hold_seconds,
                1 if claim else 0,
                claim.fingerprint if claim else "",
                hold_id(call_id),
                claim.lease_seconds if claim else 0,
                call_id,
                DONE_TTL_SECONDS,
                admission.min_hold_units,
                admission.min_tokens_reserved,
                call.api_key_id,
                call.budget.units if call.budget is not None else -1,
                call.budget.period if call.budget is not None else "",
            ),
        )
        return admission_result(res, limits)

    async def settle(self, settlement: Settlement) -> int:
        k, s, call = self.keys, settlement, settlement.call
        claim, tenant, call_id, limits = call.idempotency, call.tenant, call.call_id, call.limits
        mode = 0 if claim is None else (2 if s.reply is not None else 1)
        reply = encode_reply(s.reply) if s.reply is not None else b""
        balance: int = await self._eval_hot(
            "settle",
            (
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.wallet(tenant),
                k.ledger(tenant),
                k.ledger_order(tenant),
                k.rate(tenant, call.api_key_id),
                k.idempotency(tenant, claim.scope if claim else ""),
                k.done(tenant, call_id),
            ),
            (
                hold_id(call_id),
                s.charge_units,
                charge_id(call_id),
                tenant,
                s.reason,
                call.request_id,
                limits.requests_per_minute,
                limits.tokens_per_minute,
                call.tokens_reserved,
                s.tokens_used,
                mode,
                claim.fingerprint if claim else "",
                call_id,
                reply,
                s.reply_ttl_seconds,
                DONE_TTL_SECONDS,
                s.model,
                call.api_key_id,
            ),
            durable=s.charge_units > 0 or s.reply is not None,
        )
        return balance

    async def release(self, release: Release) -> None:
        k, call = self.keys, release.call
        claim, tenant, call_id = call.idempotency, call.tenant, call.call_id
        await self._eval_hot(
            "release",
            (
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.rate(tenant, call.api_key_id),
                k.idempotency(tenant, claim.scope if claim else ""),
                k.done(tenant, call_id),
            ),
            (
                hold_id(call_id),
                call.limits.requests_per_minute,
                call.limits.tokens_per_minute,
                call.tokens_reserved,
                1 if claim else 0,
                call_id,
                DONE_TTL_SECONDS,
            ),
        )
