"""Grants and adjustments on a real Redis primary whose replica stops acknowledging (paused
while the primary still counts it): the write stands on the primary, its answer is unknown."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.admin.service import add_entry
from gateway.config.loader import load_config
from gateway.errors import OutcomeUnknown
from gateway.store.redis import RedisStore
from gateway.store.redis.pipeline import ReplicationTimeout
from tests.support.redis_replicated import ReplicatedRedis
from tests.support.serial import STORE_FAULTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pair(redis_binary: str, tmp_path: Path) -> Iterator[ReplicatedRedis]:
    with ReplicatedRedis.running(redis_binary, tmp_path) as replicated:
        yield replicated


@STORE_FAULTS
@pytest.mark.parametrize("kind", ["grant", "adjustment"])
def test_an_unconfirmed_entry_is_an_unknown_outcome_and_its_retry_applies_once(
    pair: ReplicatedRedis, kind: str
) -> None:
    config = load_config(ROOT / "config" / "gateway.toml")
    store = RedisStore(pair.url(), prefix="gw:")
    entry_id = f"inv-{kind}"

    async def scenario() -> None:
        await store.open()
        try:
            pair.stall_replica()
            with pytest.raises(OutcomeUnknown) as caught:
                await add_entry(
                    store, config, "default", kind=kind, amount="7", reason="x", entry_id=entry_id
                )
            error = caught.value
            assert (error.status_code, error.code, error.retryable) == (
                504,
                "outcome_unknown",
                False,
            )
            assert error.headers["x-should-retry"] == "false"
            assert error.details[0].field == "id" and repr(entry_id) in error.details[0].message
            assert isinstance(error.__cause__.__cause__, ReplicationTimeout)  # type: ignore[union-attr]
            # It stood; the retry with the same id answers it and moves nothing more.
            pair.resume_replica()
            retried = await add_entry(
                store, config, "default", kind=kind, amount="7", reason="x", entry_id=entry_id
            )
            assert retried.created is False and retried.entry.amount_units == 70_000
            assert (await store.wallet("default")).balance_units == 70_000
        finally:
            await store.close()

    asyncio.run(scenario())
