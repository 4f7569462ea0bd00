"""`gateway callbacks secret` and `gateway callbacks redeliver` as operators script them: a real
subprocess on the embedded store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.store.base import CallbackAttempt, RateLimits, TaskCallback, TaskCreate
from gateway.store.sqlite import SqliteStore
from tests.app.test_admin_cli import run
from tests.store.support import create_confirmed


def test_secret_rotation_prints_only_the_new_secret_and_keeps_the_old_one(
    tmp_path: Path,
) -> None:
    first = run(tmp_path, "callbacks", "secret", "--tenant", "default")
    assert first.returncode == 0, first.stderr
    [secret] = first.stdout.splitlines()
    assert secret.startswith("whsec_")
    [again] = run(tmp_path, "callbacks", "secret", "--tenant", "default").stdout.splitlines()
    assert again != secret

    async def read() -> tuple[str, str | None]:
        store = SqliteStore(tmp_path / "data" / "gateway.db")
        await store.open()
        try:
            keys = await store.callback_secrets("default")
        finally:
            await store.close()
        assert keys is not None
        return keys.secret, keys.previous

    assert asyncio.run(read()) == (again, secret)
    unknown = run(tmp_path, "callbacks", "secret", "--tenant", "nobody")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert len(unknown.stderr.strip().splitlines()) == 1


def test_redeliver_schedules_one_more_attempt_of_a_failed_callback(tmp_path: Path) -> None:
    assert run(tmp_path, "tenants", "list").returncode == 0  # the store, made

    async def failed_callback() -> None:
        store = SqliteStore(tmp_path / "data" / "gateway.db")
        await store.open()
        try:
            create = TaskCreate(
                task_id="task_cb",
                tenant="default",
                api_key_id="k1",
                request_id="req_1",
                limits=RateLimits(requests_per_minute=100),
                capability="text_to_image",
                model="auto",
                resolved_model="image-model-2",
                price_units=0,
                input={"prompt": "p"},
                metadata={},
                callback=TaskCallback(url="https://hooks.example.com/in", callback_id="cb_1"),
            )
            await create_confirmed(store, create)
            await store.request_cancel("default", "task_cb")
            (claimed,) = await store.claim_callbacks(lease_seconds=30, limit=1)
            assert claimed.callback is not None and claimed.callback.lease_token is not None
            await store.record_callback_attempt(
                CallbackAttempt(
                    tenant="default",
                    task_id="task_cb",
                    lease_token=claimed.callback.lease_token,
                    status="failed",
                    last_error="HTTP 500",
                )
            )
        finally:
            await store.close()

    asyncio.run(failed_callback())
    done = run(tmp_path, "callbacks", "redeliver", "task_cb")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().split("\t") == ["task_cb", "default", "pending"]

    async def due() -> list[str]:
        store = SqliteStore(tmp_path / "data" / "gateway.db")
        await store.open()
        try:
            claimed = await store.claim_callbacks(lease_seconds=30, limit=5)
            return [t.callback.callback_id for t in claimed if t.callback]
        finally:
            await store.close()

    assert asyncio.run(due()) == ["cb_1"]
    missing = run(tmp_path, "callbacks", "redeliver", "task_nope")
    assert missing.returncode == 1 and "no such task" in missing.stderr
