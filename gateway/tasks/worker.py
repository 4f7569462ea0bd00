"""The task worker: takes queued tasks from the store and runs them, `concurrency` at a time.

For each task: reference URLs are fetched into artifacts (the task's `input` then shows their
ids), the provider generates the media, every output is stored as an artifact, and the task is
finalized in one idempotent store step with its refund: full when it failed or was canceled
without output, the undelivered images' price when fewer came back than were paid for.

The worker holds each task under a lease it renews (a heartbeat, and every progress report).
A worker that dies leaves its tasks to expire; `claim_task` hands them to the next worker (up
to `max_attempts` claims, then they fail with a full refund), so no task stays `running`
forever. Cancel is checked at every progress report: the provider stops between steps.
Runs inside `gateway serve` by default, or alone as `gateway worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from typing import Any

from gateway.artifacts.service import ArtifactService
from gateway.config.schema import GatewaySection
from gateway.errors import GatewayError, StoreUnavailable
from gateway.logging import get_logger
from gateway.metrics import DisabledMetrics, Metrics
from gateway.routing.leases import Lease
from gateway.routing.resolver import Route, Router
from gateway.routing.upstream_errors import as_gateway_error
from gateway.store.base import Store, TaskFinal, TaskProgress, TaskRecord
from providers.base import ImageRequest, MediaInput, MusicRequest
from providers.errors import ProviderError, TaskCanceled

__all__ = ["Worker"]

_log = get_logger("gateway.worker")


class _Lost(Exception):
    """This worker no longer holds the task (its lease ran out, or it ended elsewhere)."""


class Worker:
    def __init__(
        self,
        store: Store,
        router: Router,
        artifacts: ArtifactService,
        *,
        worker_id: str,
        concurrency: int = 4,
        lease_seconds: float = 30.0,
        max_attempts: int = 3,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._metrics = metrics or DisabledMetrics()
        self._router = router
        self._artifacts = artifacts
        self.worker_id = worker_id
        self._concurrency = concurrency
        self._lease = lease_seconds
        self._max_attempts = max_attempts
        self._loop_task: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()

    def use(self, router: Router, artifacts: ArtifactService, section: GatewaySection) -> None:
        """A reloaded routing file: tasks claimed from now on run with these."""
        self._router, self._artifacts = router, artifacts
        self._lease, self._max_attempts = section.task_lease_seconds, section.task_max_attempts

    def start(self) -> None:
        if self._loop_task is None and self._concurrency > 0:
            self._loop_task = asyncio.get_running_loop().create_task(self.run())

    async def close(self) -> None:
        """Stop taking tasks; tasks under way stop too and are taken again after their lease."""
        tasks = [t for t in (self._loop_task, *self._running) if t is not None]
        self._loop_task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def run(self) -> None:
        slots = asyncio.Semaphore(self._concurrency)
        while True:
            await slots.acquire()
            try:
                task = await self._store.claim_task(
                    self.worker_id,
                    lease_seconds=self._lease,
                    wait_seconds=1.0,
                    max_attempts=self._max_attempts,
                )
            except StoreUnavailable:
                slots.release()
                await asyncio.sleep(1.0)
                continue
            except Exception as exc:
                slots.release()
                _log.error("claim_failed", error=repr(exc))
                await asyncio.sleep(1.0)
                continue
            if task is None:
                slots.release()
                continue
            job = asyncio.get_running_loop().create_task(self.execute(task))
            self._running.add(job)
            job.add_done_callback(self._running.discard)
            job.add_done_callback(lambda _: slots.release())

    async def execute(self, task: TaskRecord) -> None:
        """Run one claimed task to its end (or until this worker loses it)."""
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat(task))
        try:
            final = await self._run(task)
        except _Lost:
            _log.info("task_lost", task_id=task.task_id)
            return
        finally:
            heartbeat.cancel()
        await self._finalize(final)

    async def _run(self, task: TaskRecord) -> TaskFinal:
        if task.cancel_requested_at is not None:
            return _ended(task, "canceled", None)
        router = self._router
        lease: Lease | None = None
        try:
            route = router.route_of(task.resolved_model)
            lease = route.lease()  # a reload closes the provider only once the task is over
            control = _Control(self, task)
            await control.checkpoint(1.0, "preparing", "reading reference inputs")
            references = await self._references(task)
            if task.capability in ("text_to_image", "image_to_image"):
                return await self._images(task, route, references, control)
            return await self._music(task, route, references, control)
        except TaskCanceled:
            return _ended(task, "canceled", None)
        except (_Lost, asyncio.CancelledError):
            raise
        except (ProviderError, GatewayError) as exc:
            router.scrubber.error(exc)  # the upstream's words may quote a credential
            error = as_gateway_error(exc)
            detail = (
                f"{error.details[0].field}: {error.details[0].message}" if error.details else ""
            )
            detail = f" ({detail})" if detail and detail not in error.message else ""
            return _ended(
                task, "failed", _error(error.code, error.message + detail, error.retryable)
            )
        except Exception as exc:
            _log.error("task_crashed", task_id=task.task_id, error=repr(exc))
            return _ended(task, "failed", _error("internal_error", "The task failed.", True))
        finally:
            if lease is not None:
                lease.release()

    async def _references(self, task: TaskRecord) -> list[MediaInput]:
        """Fetch URL references into artifacts (rewriting the task's input); each becomes a
        `MediaInput` that streams the stored bytes when the adapter reads it, never before,
        so holding the list costs nothing however many references there are. `ingest`
        checks every reference against its kind's size cap, stored artifacts included."""
        fields: list[tuple[str, str, dict[str, Any]]] = []
        task_input = dict(task.input)
        if "image" in task_input:
            fields.append(("image", "image", task_input["image"]))
            extras = task_input.get("extra_images") or []
            fields += [(f"extra_images[{i}]", "image", ref) for i, ref in enumerate(extras)]
        if "reference_audio" in task_input:
            fields.append(("reference_audio", "audio", task_input["reference_audio"]))
        inputs: list[MediaInput] = []
        changed = False
        for field, kind, reference in fields:
            record = await self._artifacts.ingest(task.tenant, reference, field=field, kind=kind)
            if reference.get("type") != "artifact":
                changed = True
                reference.clear()
                reference.update({"type": "artifact", "artifact_id": record.artifact_id})
            inputs.append(
                MediaInput(
                    mime_type=record.mime_type,
                    size_bytes=record.size_bytes,
                    open=functools.partial(self._artifacts.content, record),
                )
            )
        if changed:
            await self._touch(task, input=task_input)
        return inputs

    async def _images(
        self, task: TaskRecord, route: Route, references: list[MediaInput], control: _Control
    ) -> TaskFinal:
        params = task.input
        requested = int(params.get("n", 1))
        result = await route.provider.generate_images(
            ImageRequest(
                model=route.model.upstream_model,
                prompt=str(params["prompt"]),
                n=requested,
                quality=str(params.get("quality", "standard")),
                aspect_ratio=str(params.get("aspect_ratio", "1:1")),
                references=references,
                options=dict(
                    params.get("model_options", {}).get(route.model.options_namespace, {})
                ),
            ),
            control,
        )
        images = result.images[:requested]
        if not images:
            return _ended(task, "failed", _error("no_output", "The model returned no image.", True))
        stored = []
        for index, image in enumerate(images):
            record = await self._artifacts.save_output(
                task.tenant,
                task.task_id,
                image.data,
                image.mime_type,
                f"{task.task_id}-{index + 1}.{image.format}",
            )
            stored.append(
                {
                    "artifact_id": record.artifact_id,
                    "format": image.format,
                    "mime_type": image.mime_type,
                    "size_bytes": record.size_bytes,
                    "width": image.width,
                    "height": image.height,
                }
            )
        missing = requested - len(images)
        warnings = []
        if missing:
            warnings.append(
                {
                    "code": "fewer_images",
                    "message": f"{len(images)} of {requested} images came back; "
                    f"{missing} refunded.",
                    "field": "n",
                }
            )
        return TaskFinal(
            tenant=task.tenant,
            task_id=task.task_id,
            status="succeeded",
            output={"type": task.capability, "model": task.resolved_model, "images": stored},
            usage={
                "image_count": len(images),
                "image_pixels": sum(i.width * i.height for i in images),
            },
            warnings=warnings,
            refund_units=task.price_units // requested * missing,
            reason=f"{missing} of {requested} images not delivered" if missing else "",
        )

    async def _music(
        self, task: TaskRecord, route: Route, references: list[MediaInput], control: _Control
    ) -> TaskFinal:
        params = task.input
        result = await route.provider.generate_music(
            MusicRequest(
                model=route.model.upstream_model,
                prompt=str(params["prompt"]),
                lyrics=params.get("lyrics"),
                instrumental=bool(params.get("instrumental", False)),
                title=params.get("title"),
                reference_audio=references[0] if references else None,
                options=dict(
                    params.get("model_options", {}).get(route.model.options_namespace, {})
                ),
            ),
            control,
        )
        if not result.clips:
            return _ended(task, "failed", _error("no_output", "The model returned no audio.", True))
        clips = []
        for index, clip in enumerate(result.clips):
            record = await self._artifacts.save_output(
                task.tenant,
                task.task_id,
                clip.data,
                clip.mime_type,
                f"{task.task_id}-{index + 1}.{clip.format}",
            )
            clips.append(
                {
                    "artifact_id": record.artifact_id,
                    "format": clip.format,
                    "mime_type": clip.mime_type,
                    "size_bytes": record.size_bytes,
                    "duration_seconds": clip.duration_seconds,
                    "title": clip.title,
                }
            )
        return TaskFinal(
            tenant=task.tenant,
            task_id=task.task_id,
            status="succeeded",
            output={"type": task.capability, "model": task.resolved_model, "clips": clips},
            usage={"audio_seconds": round(sum(c.duration_seconds for c in result.clips), 3)},
        )

    # The store, seen from a running task ---------------------------------------------------

    async def _touch(
        self,
        task: TaskRecord,
        *,
        progress: TaskProgress | None = None,
        input: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        """Renew the lease (with progress or input); None when the store is away for now."""
        try:
            record = await self._store.touch_task(
                task.tenant,
                task.task_id,
                self.worker_id,
                lease_seconds=self._lease,
                progress=progress,
                input=input,
            )
        except StoreUnavailable:
            return None
        if record is None or record.status != "running" or record.worker_id != self.worker_id:
            raise _Lost()
        return record

    async def _heartbeat(self, task: TaskRecord) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            with contextlib.suppress(_Lost):
                await self._touch(task)

    async def _finalize(self, final: TaskFinal) -> None:
        """Idempotent: retried until the store takes it (a task already ended stays as it is)."""
        delay = 0.2
        while True:
            try:
                task = await self._store.finalize_task(final)
            except StoreUnavailable:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            _log.info(
                "task_finished",
                task_id=task.task_id,
                status=task.status,
                refunded_units=task.refunded_units,
            )
            if task.status == final.status:  # else it had ended already, and was counted then
                ended = task.completed_at or time.time()
                self._metrics.task_finished(
                    task.capability,
                    task.resolved_model,
                    task.status,
                    task.refunded_units,
                    ended - task.created_at,
                )
                self._metrics.key_refunded(task.api_key_id, task.refunded_units)
            return


class _Control:
    """`providers.base.TaskControl` for one task: progress goes to the store, cancel comes back."""

    def __init__(self, worker: Worker, task: TaskRecord) -> None:
        self._worker = worker
        self._task = task
        self._percent = 0.0

    async def checkpoint(self, percent: float, stage: str, message: str = "") -> None:
        # Progress never goes back: the worker's own steps come before the provider's count.
        self._percent = max(self._percent, min(round(percent, 1), 99.0))
        progress = TaskProgress(percent=self._percent, stage=stage, message=message)
        record = await self._worker._touch(self._task, progress=progress)
        if record is not None and record.cancel_requested_at is not None:
            raise TaskCanceled("canceled by the caller")


def _error(code: str, message: str, retryable: bool) -> dict[str, Any]:
    return {"code": code, "message": message, "retryable": retryable}


def _ended(task: TaskRecord, status: str, error: dict[str, Any] | None) -> TaskFinal:
    """A task that ends without output: refunded in full."""
    return TaskFinal(
        tenant=task.tenant,
        task_id=task.task_id,
        status="canceled" if status == "canceled" else "failed",
        error=error,
        refund_units=task.price_units,
        reason=f"task {status}",
    )
