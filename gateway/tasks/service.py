"""Media tasks for callers: create (validate, resolve, price, two store steps), look up, list
and cancel. Running them is `gateway.tasks.worker`'s job.

Create is prepaid, in two steps (docs/store.md, "When a step's outcome is unknown"): the store
takes the rate limit, the idempotency key and a hold of the price and writes the task
unconfirmed; then the data URI references are written as artifacts (`references.py`: checked
before, written only now that the create was admitted) and the task is confirmed (the hold
becomes the debit, the task is queued) before the 202. A create whose first step's answer never
came, or that fails after it, is abandoned through the finisher: the unconfirmed task goes
whole and its id is fenced. So a retryable failure never leaves a task or a charge behind.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import msgspec

from gateway.admission.finisher import CallFinisher
from gateway.admission.gatekeeper import key_budget_exceeded
from gateway.admission.idempotency import claim_for
from gateway.artifacts.service import ArtifactService
from gateway.auth import Caller
from gateway.billing.money import format_credits
from gateway.billing.pricing import media_unit_price
from gateway.callbacks.signing import new_secret
from gateway.callbacks.urls import CallbackPolicy, check_callback_url
from gateway.clock import wall
from gateway.errors import (
    ErrorDetail,
    GatewayError,
    IdempotencyInProgress,
    IdempotencyKeyReused,
    InsufficientCredits,
    NotFound,
    RateLimited,
    StoreUnavailable,
    ValidationFailed,
)
from gateway.ids import new_callback_id, new_task_id
from gateway.metrics import DisabledMetrics, Metrics
from gateway.routing.options import namespace_problems
from gateway.routing.resolver import NO_NEEDS, Choice, Route, Router
from gateway.schemas.media import (
    ImageGenerationRequest,
    ImageToImageRequest,
    MediaRequest,
    ReferenceAudioToMusicRequest,
)
from gateway.store.base import (
    KeyBudget,
    RateState,
    Store,
    TaskAbandon,
    TaskCallback,
    TaskConfirm,
    TaskCreate,
    TaskCreateOutcome,
    TaskCreateResult,
    TaskPage,
    TaskRecord,
    TaskStatus,
)
from gateway.tasks.references import CheckedReference, check_reference, save_references
from gateway.tasks.validation import media_problems

__all__ = ["TaskAccepted", "TaskService"]

_IDEMPOTENCY_TTL_SECONDS = 86_400
_HD = frozenset({"hd"})


@dataclass(frozen=True, slots=True)
class TaskAccepted:
    task: TaskRecord
    replayed: bool
    rate: RateState


class TaskService:
    def __init__(
        self,
        store: Store,
        router: Router,
        artifacts: ArtifactService,
        finisher: CallFinisher,
        *,
        hold_seconds: int = 900,
        metrics: Metrics | None = None,
        callback_policy: CallbackPolicy | None = None,
    ) -> None:
        self._store = store
        self._callback_policy = callback_policy or CallbackPolicy()
        self._router = router
        self._artifacts = artifacts
        self._finisher = finisher
        self._hold_seconds = hold_seconds
        self._metrics = metrics or DisabledMetrics()

    async def create(
        self,
        caller: Caller,
        capability: str,
        request: MediaRequest,
        *,
        path: str,
        request_id: str,
        idempotency_key: str | None,
    ) -> TaskAccepted:
        problems = media_problems(request)
        if problems:
            raise _invalid(problems)
        quality = getattr(request, "quality", "standard")
        choice, route = self._resolve(request.model, caller, capability, quality)
        problems = namespace_problems(request.model_options, choice)
        if problems:
            raise _invalid(problems)
        tenant = caller.tenant.name
        callback = await self._callback(tenant, request)
        claim = claim_for(
            tenant=tenant,
            method="POST",
            path=path,
            key=idempotency_key,
            request=request,
            lease_seconds=_IDEMPOTENCY_TTL_SECONDS,
        )
        count = request.n if isinstance(request, ImageGenerationRequest) else 1
        price = media_unit_price(route.model, capability, quality) * count
        references = await self._references(tenant, request)
        task_id = new_task_id()
        abandon = TaskAbandon(
            tenant=tenant, task_id=task_id, idempotency_scope=claim.scope if claim else ""
        )
        try:
            result = await self._store.create_task(
                TaskCreate(
                    task_id=task_id,
                    tenant=tenant,
                    api_key_id=caller.key_id,
                    request_id=request_id,
                    limits=caller.tenant.limits,
                    capability=capability,
                    model=request.model,
                    resolved_model=route.model.id,
                    price_units=price,
                    input=_echo(request, references),
                    metadata=dict(request.metadata),
                    idempotency=claim,
                    budget=caller.budget,
                    reply_ttl_seconds=_IDEMPOTENCY_TTL_SECONDS,
                    hold_seconds=self._hold_seconds,
                    callback=callback,
                )
            )
        except (StoreUnavailable, asyncio.CancelledError):
            # It may still reach the store: undo it then, and fence it if it comes later.
            self._finisher.abandon(abandon)
            raise
        outcome = result.outcome
        if outcome is TaskCreateOutcome.CREATED and result.task is not None:
            try:
                task = await self._confirm(result.task, references, abandon)
            except GatewayError as exc:  # the create took its request: the edge reports it
                exc.rate = msgspec.structs.replace(result.rate, limit_tokens=0)
                raise
            self._metrics.task_created(capability, route.model.id, price)
            self._metrics.key_charged(caller.key_id, price)
            return TaskAccepted(task=task, replayed=False, rate=result.rate)
        if outcome is TaskCreateOutcome.REPLAY and result.task is not None:
            return TaskAccepted(task=result.task, replayed=True, rate=result.rate)
        raise _refusal(result, price, caller.budget)

    async def _confirm(
        self, task: TaskRecord, references: list[CheckedReference], abandon: TaskAbandon
    ) -> TaskRecord:
        """Write the references, then confirm: the task as the 202 shows it. A failure before
        the confirmation abandons the create (nothing stays held, written or listed)."""
        try:
            await save_references(self._artifacts, task.tenant, task.task_id, references)
        except BaseException:
            self._finisher.abandon(abandon)
            raise
        confirmed = await self._finisher.confirm(
            TaskConfirm(tenant=task.tenant, task_id=task.task_id)
        )
        return confirmed or task  # (not answered: it stays queued in the finisher)

    def _resolve(
        self, model: str, caller: Caller, capability: str, quality: str
    ) -> tuple[Choice, Route]:
        """The routes `model` may take, and the one the task is fixed to: for `auto`, the
        first of the policy's order (conditions, price ceiling at `quality`) whose upstream's
        breaker lets calls through."""
        needs = _HD if quality == "hd" else NO_NEEDS
        try:
            choice = self._router.choose(model, caller.tenant, capability, needs)
        except GatewayError as exc:
            if exc.status_code >= 500:
                raise
            raise _invalid([ErrorDetail(field="model", message=exc.message)]) from exc
        route = next((r for r in choice.routes if not r.breaker.refuses()), choice.routes[0])
        return choice, route

    async def _callback(self, tenant: str, request: MediaRequest) -> TaskCallback | None:
        """The create's callback, its URL checked; the tenant's signing secret is made with
        its first one."""
        if request.callback is None:
            return None
        url = request.callback.url
        check_callback_url(url, self._callback_policy)
        await self._store.ensure_callback_secret(tenant, new_secret())
        return TaskCallback(url=url, callback_id=new_callback_id())

    async def _references(self, tenant: str, request: MediaRequest) -> list[CheckedReference]:
        """Every reference checked, in the order the request gives them; nothing written."""
        given: list[tuple[str, dict[str, Any], str]] = []
        if isinstance(request, ImageToImageRequest):
            given.append(("image", msgspec.to_builtins(request.image), "image"))
            given += [
                (f"extra_images[{i}]", msgspec.to_builtins(item), "image")
                for i, item in enumerate(request.extra_images)
            ]
        if isinstance(request, ReferenceAudioToMusicRequest):
            given.append(("reference_audio", msgspec.to_builtins(request.reference_audio), "audio"))
        return [
            await check_reference(self._artifacts, tenant, reference, field=field, kind=kind)
            for field, reference, kind in given
        ]

    async def get(self, caller: Caller, task_id: str) -> TaskRecord:
        task = await self._store.get_task(caller.tenant.name, task_id)
        if task is None:
            raise NotFound("No such task.")
        return task

    async def list(
        self,
        caller: Caller,
        *,
        limit: int,
        after: str | None,
        status: TaskStatus | None,
        capability: str | None,
    ) -> TaskPage:
        return await self._store.list_tasks(
            caller.tenant.name, limit=limit, after=after, status=status, capability=capability
        )

    async def cancel(self, caller: Caller, task_id: str) -> TaskRecord:
        before = await self._store.get_task(caller.tenant.name, task_id)
        if before is None:
            raise NotFound("No such task.")
        task = await self._store.request_cancel(caller.tenant.name, task_id)
        if task is None:
            raise NotFound("No such task.")
        if before.status == "queued" and task.status == "canceled":  # ended here, not by a worker
            self._metrics.task_finished(
                task.capability,
                task.resolved_model,
                task.status,
                task.refunded_units,
                (task.completed_at or task.created_at) - task.created_at,
            )
            self._metrics.key_refunded(task.api_key_id, task.refunded_units)
        return task


def _echo(request: MediaRequest, references: list[CheckedReference]) -> dict[str, Any]:
    """The request as the task shows it: metadata apart, references that were data URIs or
    artifacts as artifact ids (URLs stay until the worker fetches them)."""
    echo: dict[str, Any] = msgspec.to_builtins(request)
    echo.pop("metadata", None)
    echo.pop("callback", None)  # (the task's `callback` object shows it)
    shown = iter(reference.echo for reference in references)
    if isinstance(request, ImageToImageRequest):
        echo["image"] = next(shown)
        echo["extra_images"] = list(shown)
    if isinstance(request, ReferenceAudioToMusicRequest):
        echo["reference_audio"] = next(shown)
    return echo


def _refusal(result: TaskCreateResult, price: int, budget: KeyBudget | None) -> GatewayError:
    """What the store refused, as the error that says why (with the buckets for the headers)."""
    outcome = result.outcome
    error: GatewayError
    if outcome is TaskCreateOutcome.RATE_LIMITED:
        error = RateLimited()  # (its Retry-After is the edge's, from the rate state)
    elif outcome is TaskCreateOutcome.INSUFFICIENT_CREDITS:
        available = format_credits(max(result.available_units, 0))
        error = InsufficientCredits(
            f"This task costs {format_credits(price)} credits; the wallet has "
            f"{available} available.",
            details=[
                ErrorDetail(field="price_credits", message=format_credits(price)),
                ErrorDetail(field="available_credits", message=available),
            ],
        )
    elif outcome is TaskCreateOutcome.KEY_BUDGET_EXCEEDED and budget is not None:
        error = key_budget_exceeded(budget, wall())
    elif outcome is TaskCreateOutcome.IN_PROGRESS:
        error = IdempotencyInProgress()
    elif outcome is TaskCreateOutcome.KEY_REUSED:
        error = IdempotencyKeyReused()
    else:  # ABANDONED: only an id fenced before its create arrived, which a new id never is
        error = StoreUnavailable()
    error.rate = msgspec.structs.replace(result.rate, limit_tokens=0)  # for the headers
    return error


def _invalid(problems: list[ErrorDetail]) -> ValidationFailed:
    return ValidationFailed(
        "; ".join(f"{p.field}: {p.message}" for p in problems), details=problems
    )
