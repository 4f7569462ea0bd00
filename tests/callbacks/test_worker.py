"""The delivery worker in process, on the embedded store and a local receiver: a fault of the
gateway's own while sending (here: rendering the task) counts as a failed attempt and is
retried on the schedule, never left hanging on its lease."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from gateway.callbacks.sender import CallbackSender
from gateway.callbacks.urls import CallbackPolicy
from gateway.callbacks.worker import CallbackWorker
from gateway.store.base import RateLimits, TaskCallback, TaskCreate, TaskRecord
from gateway.store.sqlite import SqliteStore
from tests.store.support import create_confirmed
from tests.support.webhook_receiver import Answer, receiver


def test_a_fault_while_sending_is_a_failed_attempt_retried_on_the_schedule(
    tmp_path: Path,
) -> None:
    renders: list[str] = []

    def render(task: TaskRecord) -> dict[str, Any]:
        renders.append(task.task_id)
        if len(renders) == 1:
            raise RuntimeError("a renderer bug")
        return {"task_id": task.task_id, "status": task.status}

    async def scenario(url: str) -> TaskRecord | None:
        store = SqliteStore(tmp_path / "gateway.db")
        await store.open()
        worker = CallbackWorker(
            store,
            CallbackSender(CallbackPolicy.of(["127.0.0.1/32"])),
            render,
            retry_waits=(0.1,),
            poll_seconds=0.05,
        )
        try:
            await store.ensure_callback_secret("t1", "whsec_" + "QUJD" * 8)
            create = TaskCreate(
                task_id="task_a",
                tenant="t1",
                api_key_id="k1",
                request_id="req_1",
                limits=RateLimits(requests_per_minute=100),
                capability="text_to_image",
                model="auto",
                resolved_model="m",
                price_units=0,
                input={},
                metadata={},
                callback=TaskCallback(url=url, callback_id="cb_a"),
            )
            await create_confirmed(store, create)
            await store.request_cancel("t1", "task_a")
            worker.start()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                task = await store.get_task("t1", "task_a")
                if task and task.callback and task.callback.status == "delivered":
                    return task
                await asyncio.sleep(0.05)
            return await store.get_task("t1", "task_a")
        finally:
            await worker.close()
            await store.close()

    with receiver() as hooks:
        hooks.scripts["/in"] = [Answer(200)]
        task = asyncio.run(scenario(hooks.url("/in")))
        assert task is not None and task.callback is not None
        assert (task.callback.status, task.callback.attempt_count) == ("delivered", 2)
        assert len(hooks.hits("/in")) == 1
