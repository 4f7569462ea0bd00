"""Admission outcomes -> errors; the rate state goes to the response headers either way."""

from __future__ import annotations

import msgspec

from gateway.auth import Caller
from gateway.context import RequestContext
from gateway.errors import (
    IdempotencyInProgress,
    IdempotencyKeyReused,
    InsufficientCredits,
    RateLimited,
    StoreUnavailable,
)
from gateway.ids import new_call_id
from gateway.ratelimit_headers import retry_after_seconds
from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    AdmissionResult,
    IdempotencyClaim,
    Store,
)

__all__ = ["Gatekeeper"]


class Gatekeeper:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def check(self, caller: Caller, ctx: RequestContext) -> None:
        """Requests-per-minute for endpoints that cost nothing else."""
        await self.admit(caller, ctx, call_id=new_call_id(), with_tokens=False)

    async def admit(
        self,
        caller: Caller,
        ctx: RequestContext,
        *,
        call_id: str,
        tokens: int = 0,
        hold_units: int = 0,
        hold_seconds: int = 900,
        claim: IdempotencyClaim | None = None,
        with_tokens: bool = True,
    ) -> AdmissionResult:
        """ADMITTED or REPLAY come back; every other outcome raises its error."""
        result = await self._store.admit(
            Admission(
                tenant=caller.tenant.name,
                api_key_id=caller.key_id,
                call_id=call_id,
                request_id=ctx.request_id,
                limits=caller.tenant.limits,
                tokens=tokens,
                hold_units=hold_units,
                hold_seconds=hold_seconds,
                idempotency=claim,
            )
        )
        rate = result.rate
        ctx.rate = rate if with_tokens else msgspec.structs.replace(rate, limit_tokens=0)
        outcome = result.outcome
        if outcome is AdmissionOutcome.ADMITTED or outcome is AdmissionOutcome.REPLAY:
            return result
        if outcome is AdmissionOutcome.RATE_LIMITED:
            raise RateLimited(headers={"Retry-After": str(retry_after_seconds(rate))})
        if outcome is AdmissionOutcome.INSUFFICIENT_CREDITS:
            raise InsufficientCredits(
                "The wallet balance is too low to cover this request's worst-case cost."
            )
        if outcome is AdmissionOutcome.IN_PROGRESS:
            raise IdempotencyInProgress()
        if outcome is AdmissionOutcome.ABANDONED:  # only a call id reused after its release
            raise StoreUnavailable()
        raise IdempotencyKeyReused()
