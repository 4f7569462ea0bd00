"""Builders for the contract tests: a call's admission, and the settlement or release after it;
a task created and confirmed, as the task service makes one. And how far a rate bucket can have
refilled while a test ran."""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

import msgspec

from gateway.store.base import (
    Admission,
    AdmissionResult,
    Call,
    IdempotencyClaim,
    RateLimits,
    Release,
    Settlement,
    Store,
    StoredReply,
    TaskConfirm,
    TaskCreate,
    TaskCreateOutcome,
    TaskCreateResult,
)

__all__ = [
    "Run",
    "admission",
    "as_admitted",
    "call",
    "claim",
    "create_confirmed",
    "refilled_since",
    "release",
    "seconds_since",
    "settlement",
]

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


def call(
    call_id: str,
    *,
    tenant: str = "t1",
    api_key_id: str = "k1",
    rpm: int = 1000,
    tpm: int = 0,
    tokens: int = 0,
    idempotency: IdempotencyClaim | None = None,
) -> Call:
    """One call's identity, as the chat service builds it once per call."""
    return Call(
        tenant=tenant,
        api_key_id=api_key_id,
        call_id=call_id,
        request_id=f"req_{call_id}",
        limits=RateLimits(requests_per_minute=rpm, tokens_per_minute=tpm),
        tokens_reserved=tokens,
        idempotency=idempotency,
    )


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
    min_hold: int = 0,
    min_tokens: int = 0,
) -> Admission:
    the_call = call(
        call_id,
        tenant=tenant,
        api_key_id=api_key_id,
        rpm=rpm,
        tpm=tpm,
        tokens=tokens,
        idempotency=idempotency,
    )
    return Admission(
        call=the_call,
        hold_units=hold,
        hold_seconds=hold_seconds,
        min_hold_units=min_hold,
        min_tokens_reserved=min_tokens,
    )


def settlement(
    adm: Admission,
    *,
    charge: int = 0,
    used: int = 0,
    reply: StoredReply | None = None,
    reply_ttl_seconds: int = 86_400,
    model: str = "",
) -> Settlement:
    """The settlement of a call admitted with `adm`: the same `Call` value."""
    return Settlement(
        call=adm.call,
        charge_units=charge,
        tokens_used=used,
        reason="chat",
        model=model,
        reply=reply,
        reply_ttl_seconds=reply_ttl_seconds,
    )


def release(adm: Admission) -> Release:
    return Release(call=adm.call)


def as_admitted(adm: Admission, result: AdmissionResult) -> Admission:
    """`adm` with the tokens its admission reserved (fewer with a wallet-bounded hold), as the
    chat service carries its call on to the settlement or release."""
    the_call = msgspec.structs.replace(adm.call, tokens_reserved=result.tokens_reserved)
    return msgspec.structs.replace(adm, call=the_call)


async def create_confirmed(store: Store, create: TaskCreate) -> TaskCreateResult:
    """`create_task`, then `confirm_task` when it created: both steps of a create, as the task
    service takes them (the result carries the confirmed task)."""
    result = await store.create_task(create)
    if result.outcome is TaskCreateOutcome.CREATED:
        confirmed = await store.confirm_task(
            TaskConfirm(tenant=create.tenant, task_id=create.task_id)
        )
        result = msgspec.structs.replace(result, task=confirmed)
    return result


def seconds_since(started: float) -> float:
    """Seconds since `started` (`time.monotonic()`): the most the store's clock (the Redis
    server's, for that backend) can have moved on since then."""
    return time.monotonic() - started


def refilled_since(started: float, *, per_minute: int) -> float:
    """What a bucket of `per_minute` refilled since `started` (per_minute/60 a second): a loaded
    machine takes longer than the 60 ms in which a bucket of 1000 refills one."""
    return seconds_since(started) * per_minute / 60
