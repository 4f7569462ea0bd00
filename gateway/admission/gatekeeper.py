"""Admission outcomes -> errors: what the store refused becomes the error that says why.

Nothing here knows HTTP: `check` returns the rate state for the response headers, `admit` the
store's result, and every refusal raises its `gateway.errors` error carrying the rate state
(`GatewayError.rate`), so the api layer reports the buckets whatever the outcome.
"""

from __future__ import annotations

import msgspec

from gateway.auth import Caller
from gateway.billing.money import format_credits
from gateway.errors import (
    ErrorDetail,
    GatewayError,
    IdempotencyInProgress,
    IdempotencyKeyReused,
    InsufficientCredits,
    RateLimited,
    StoreUnavailable,
)
from gateway.ids import new_call_id
from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    AdmissionResult,
    Call,
    RateState,
    Store,
)

__all__ = ["Gatekeeper"]


class Gatekeeper:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def check(self, caller: Caller, request_id: str) -> RateState:
        """Requests-per-minute for endpoints that cost nothing else. The rate state to report
        leaves the token bucket out (these calls take no tokens)."""
        tenant = caller.tenant
        call = Call(
            tenant=tenant.name,
            api_key_id=caller.key_id,
            call_id=new_call_id(),
            request_id=request_id,
            limits=tenant.limits,
        )
        result = await self._store.admit(Admission(call=call))
        rate = msgspec.structs.replace(result.rate, limit_tokens=0)
        outcome = result.outcome
        if outcome is not AdmissionOutcome.ADMITTED and outcome is not AdmissionOutcome.REPLAY:
            raise _refusal(outcome, rate)
        return rate

    async def admit(
        self, call: Call, *, hold_units: int = 0, hold_seconds: int = 900
    ) -> AdmissionResult:
        """ADMITTED or REPLAY come back; every other outcome raises its error."""
        result = await self._store.admit(
            Admission(call=call, hold_units=hold_units, hold_seconds=hold_seconds)
        )
        outcome = result.outcome
        if outcome is AdmissionOutcome.ADMITTED or outcome is AdmissionOutcome.REPLAY:
            return result
        if outcome is AdmissionOutcome.INSUFFICIENT_CREDITS:
            error: GatewayError = _too_poor(hold_units, result.available_units)
            error.rate = result.rate
            raise error
        raise _refusal(outcome, result.rate)


def _too_poor(hold_units: int, available_units: int) -> InsufficientCredits:
    """A 402 that says what the call needed, what the wallet has, and how to need less."""
    needed, available = format_credits(hold_units), format_credits(max(available_units, 0))
    return InsufficientCredits(
        f"This call needs a hold of {needed} credits for its worst case and the wallet has "
        f"{available} available. The hold prices the whole request body as prompt tokens plus "
        "max_completion_tokens (or the model's output limit when unset) as output tokens: set "
        "a smaller max_completion_tokens, or add credits.",
        details=[
            ErrorDetail(field="hold_credits", message=needed),
            ErrorDetail(field="available_credits", message=available),
            ErrorDetail(
                field="max_completion_tokens",
                message="set it lower to make the hold smaller",
            ),
        ],
    )


def _refusal(outcome: AdmissionOutcome, rate: RateState) -> GatewayError:
    error: GatewayError
    if outcome is AdmissionOutcome.RATE_LIMITED:
        error = RateLimited()  # (its Retry-After is the edge's, from the rate state)
    elif outcome is AdmissionOutcome.INSUFFICIENT_CREDITS:
        error = InsufficientCredits(
            "The wallet balance is too low to cover this request's worst-case cost."
        )
    elif outcome is AdmissionOutcome.IN_PROGRESS:
        error = IdempotencyInProgress()
    elif outcome is AdmissionOutcome.ABANDONED:  # only a call id reused after its release
        error = StoreUnavailable()
    else:
        error = IdempotencyKeyReused()
    error.rate = rate
    return error
