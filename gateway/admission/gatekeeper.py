"""Admission outcomes -> errors: what the store refused becomes the error that says why.

Nothing here knows HTTP: `check` returns the rate state for the response headers, `admit` the
store's result, and every refusal raises its `gateway.errors` error carrying the rate state
(`GatewayError.rate`), so the api layer reports the buckets whatever the outcome.
"""

from __future__ import annotations

import msgspec

from gateway.auth import Caller
from gateway.billing.money import format_credits
from gateway.clock import wall
from gateway.errors import (
    ErrorDetail,
    GatewayError,
    IdempotencyInProgress,
    IdempotencyKeyReused,
    InsufficientCredits,
    KeyBudgetExceeded,
    RateLimited,
    StoreUnavailable,
)
from gateway.ids import new_call_id
from gateway.schemas.times import iso
from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    AdmissionResult,
    Call,
    KeyBudget,
    RateState,
    Store,
)
from gateway.store.periods import period_bounds

__all__ = ["Gatekeeper", "key_budget_exceeded"]


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
        self,
        call: Call,
        *,
        hold_units: int = 0,
        hold_seconds: int = 900,
        min_hold_units: int = 0,
        min_tokens_reserved: int = 0,
        limit_field: str = "max_completion_tokens",
    ) -> AdmissionResult:
        """ADMITTED or REPLAY come back; every other outcome raises its error. With
        `min_hold_units` the hold is wallet-bounded (`Admission`): the result's `hold_units`
        may be less than asked. `limit_field` is the request's output limit as the client's
        dialect names it, for the 402's advice."""
        result = await self._store.admit(
            Admission(
                call=call,
                hold_units=hold_units,
                hold_seconds=hold_seconds,
                min_hold_units=min_hold_units,
                min_tokens_reserved=min_tokens_reserved,
            )
        )
        outcome = result.outcome
        if outcome is AdmissionOutcome.ADMITTED or outcome is AdmissionOutcome.REPLAY:
            return result
        if outcome is AdmissionOutcome.KEY_BUDGET_EXCEEDED and call.budget is not None:
            error: GatewayError = key_budget_exceeded(call.budget, wall())
            error.rate = result.rate
            raise error
        if outcome is AdmissionOutcome.INSUFFICIENT_CREDITS:
            bounded = 0 < min_hold_units < hold_units
            needed = min_hold_units if bounded else hold_units
            error = _too_poor(needed, result.available_units, limit_field, bounded=bounded)
            error.rate = result.rate
            raise error
        raise _refusal(outcome, result.rate)


def key_budget_exceeded(budget: KeyBudget, now: float) -> KeyBudgetExceeded:
    """The 402 of a call the key's budget cannot cover: when it has room again."""
    _, resets_at = period_bounds(budget.period, now)
    when = iso(resets_at) if resets_at is not None else "never"
    again = f"it resets at {when}" if resets_at is not None else "it never resets"
    return KeyBudgetExceeded(
        f"This API key's {budget.period} budget of {format_credits(budget.units)} credits "
        f"cannot cover this call ({again}).",
        details=[ErrorDetail(field="resets_at", message=when)],
    )


def _too_poor(
    hold_units: int, available_units: int, limit_field: str, *, bounded: bool
) -> InsufficientCredits:
    """A 402 that says what the call needed, what the wallet has, and how to need less."""
    needed, available = format_credits(hold_units), format_credits(max(available_units, 0))
    if bounded:
        what = (
            f"This call needs a hold of at least {needed} credits and the wallet has "
            f"{available} available. The hold prices the whole request body as prompt tokens "
            "plus the answer's first output tokens (a longer answer is held, and asked of the "
            "model, only as far as the wallet pays)"
        )
    else:
        what = (
            f"This call needs a hold of {needed} credits for its worst case and the wallet has "
            f"{available} available. The hold prices the whole request body as prompt tokens "
            f"plus {limit_field} (or the model's output limit when unset) as output tokens"
        )
    return InsufficientCredits(
        f"{what}: send a shorter request or a smaller {limit_field}, or add credits.",
        details=[
            ErrorDetail(field="hold_credits", message=needed),
            ErrorDetail(field="available_credits", message=available),
            ErrorDetail(field=limit_field, message="set it lower to make the hold smaller"),
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
