"""Media tasks for callers: create (validate, resolve, price, one atomic store step), look up,
list and cancel. Running them is `gateway.tasks.worker`'s job.

Create is prepaid: the store debits the price in the same step that writes the task `queued`,
records the idempotency key and enqueues it, so a create either happened whole or not at all.
Reference inputs given as data URIs or artifact ids are checked (and data URIs stored as
artifacts) before that step, so a bad one is a 422 and the task holds no large inline data;
URLs are fetched by the worker, which can take its time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from gateway.artifacts.service import ArtifactService
from gateway.auth import Caller
from gateway.billing.money import format_credits
from gateway.billing.pricing import media_unit_price
from gateway.errors import (
    ErrorDetail,
    GatewayError,
    IdempotencyKeyReused,
    InsufficientCredits,
    NotFound,
    RateLimited,
    ValidationFailed,
)
from gateway.idempotency import claim_for
from gateway.ids import new_task_id
from gateway.metrics import DisabledMetrics, Metrics
from gateway.ratelimit_headers import retry_after_seconds
from gateway.routing.options import namespace_problems
from gateway.routing.resolver import NO_NEEDS, Choice, Route, Router
from gateway.schemas.media import (
    ImageGenerationRequest,
    ImageToImageRequest,
    MediaRequest,
    ReferenceAudioToMusicRequest,
)
from gateway.store.base import (
    RateState,
    Store,
    TaskCreate,
    TaskCreateOutcome,
    TaskPage,
    TaskRecord,
    TaskStatus,
)
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
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._router = router
        self._artifacts = artifacts
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
        claim = claim_for(
            tenant=caller.tenant.name,
            method="POST",
            path=path,
            key=idempotency_key,
            request=request,
            lease_seconds=_IDEMPOTENCY_TTL_SECONDS,
        )
        count = request.n if isinstance(request, ImageGenerationRequest) else 1
        price = media_unit_price(route.model, capability, quality) * count
        task_input = await self._input(caller.tenant.name, request)
        result = await self._store.create_task(
            TaskCreate(
                task_id=new_task_id(),
                tenant=caller.tenant.name,
                api_key_id=caller.key_id,
                request_id=request_id,
                limits=caller.tenant.limits,
                capability=capability,
                model=request.model,
                resolved_model=route.model.id,
                price_units=price,
                input=task_input,
                metadata=dict(request.metadata),
                idempotency=claim,
                reply_ttl_seconds=_IDEMPOTENCY_TTL_SECONDS,
            )
        )
        outcome = result.outcome
        if result.task is not None and outcome in (
            TaskCreateOutcome.CREATED,
            TaskCreateOutcome.REPLAY,
        ):
            replayed = outcome is TaskCreateOutcome.REPLAY
            if not replayed:
                self._metrics.task_created(capability, route.model.id, price)
            return TaskAccepted(task=result.task, replayed=replayed, rate=result.rate)
        error: GatewayError
        if outcome is TaskCreateOutcome.RATE_LIMITED:
            error = RateLimited(headers={"Retry-After": str(retry_after_seconds(result.rate))})
        elif outcome is TaskCreateOutcome.INSUFFICIENT_CREDITS:
            error = InsufficientCredits(
                f"This task costs {format_credits(price)} credits; the wallet has "
                f"{format_credits(max(result.available_units, 0))} available.",
                details=[
                    ErrorDetail(field="price_credits", message=format_credits(price)),
                    ErrorDetail(
                        field="available_credits",
                        message=format_credits(max(result.available_units, 0)),
                    ),
                ],
            )
        else:
            error = IdempotencyKeyReused()
        error.rate = msgspec.structs.replace(result.rate, limit_tokens=0)  # for the headers
        raise error

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

    async def _input(self, tenant: str, request: MediaRequest) -> dict[str, Any]:
        """The request as the task shows it: metadata apart, references that were data URIs or
        artifacts as artifact ids (URLs stay until the worker fetches them)."""
        echo: dict[str, Any] = msgspec.to_builtins(request)
        echo.pop("metadata", None)
        if isinstance(request, ImageToImageRequest):
            echo["image"] = await self._reference(tenant, echo["image"], "image", "image")
            echo["extra_images"] = [
                await self._reference(tenant, item, f"extra_images[{i}]", "image")
                for i, item in enumerate(echo["extra_images"])
            ]
        if isinstance(request, ReferenceAudioToMusicRequest):
            echo["reference_audio"] = await self._reference(
                tenant, echo["reference_audio"], "reference_audio", "audio"
            )
        return echo

    async def _reference(
        self, tenant: str, reference: dict[str, Any], field: str, kind: str
    ) -> dict[str, Any]:
        if reference["type"] == "url":
            self._artifacts.check_url(str(reference["url"]), field=f"{field}.url")
            return reference
        record = await self._artifacts.ingest(tenant, reference, field=field, kind=kind)
        return {"type": "artifact", "artifact_id": record.artifact_id}

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
        return task


def _invalid(problems: list[ErrorDetail]) -> ValidationFailed:
    return ValidationFailed(
        "; ".join(f"{p.field}: {p.message}" for p in problems), details=problems
    )
