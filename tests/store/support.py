"""Builders for the contract tests: a call's admission, and the settlement or release after it."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from gateway.store.base import (
    Admission,
    IdempotencyClaim,
    RateLimits,
    Release,
    Settlement,
    StoredReply,
)

__all__ = ["Run", "admission", "claim", "release", "settlement"]

_T = TypeVar("_T")


class Run(Protocol):
    """Runs one coroutine to completion on the test's event loop."""

    def __call__(self, coro: Coroutine[Any, Any, _T], /) -> _T: ...


def claim(
    scope: str = "t1:POST:/v1/chat/completions:key-1",
    fingerprint: str = "fp-a",
    *,
    lease_seconds: int = 900,
) -> IdempotencyClaim:
    return IdempotencyClaim(scope=scope, fingerprint=fingerprint, lease_seconds=lease_seconds)


def admission(
    call_id: str,
    *,
    tenant: str = "t1",
    api_key_id: str = "k1",
    rpm: int = 1000,
    tpm: int = 0,
    tokens: int = 0,
    hold: int = 0,
    hold_seconds: int = 900,
    idempotency: IdempotencyClaim | None = None,
) -> Admission:
    return Admission(
        tenant=tenant,
        api_key_id=api_key_id,
        call_id=call_id,
        request_id=f"req_{call_id}",
        limits=RateLimits(requests_per_minute=rpm, tokens_per_minute=tpm),
        tokens=tokens,
        hold_units=hold,
        hold_seconds=hold_seconds,
        idempotency=idempotency,
    )


def settlement(
    adm: Admission,
    *,
    charge: int = 0,
    used: int = 0,
    reply: StoredReply | None = None,
    reply_ttl_seconds: int = 86_400,
) -> Settlement:
    """The settlement of a call admitted with `adm` (same tenant, key, limits, reservation)."""
    return Settlement(
        tenant=adm.tenant,
        api_key_id=adm.api_key_id,
        call_id=adm.call_id,
        request_id=adm.request_id,
        limits=adm.limits,
        charge_units=charge,
        tokens_reserved=adm.tokens,
        tokens_used=used,
        reason="chat",
        idempotency=adm.idempotency,
        reply=reply,
        reply_ttl_seconds=reply_ttl_seconds,
    )


def release(adm: Admission) -> Release:
    return Release(
        tenant=adm.tenant,
        api_key_id=adm.api_key_id,
        call_id=adm.call_id,
        limits=adm.limits,
        tokens_reserved=adm.tokens,
        idempotency=adm.idempotency,
    )
