"""Grants and adjustments on a real Redis whose money writes wait for a replica that never
acknowledges (one server, `wait_replicas=1`): the write stands, its answer is unknown."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from gateway.admin.service import add_entry
from gateway.config.loader import load_config
from gateway.errors import OutcomeUnknown
from gateway.store.redis import RedisStore
from gateway.store.redis.pipeline import ReplicationTimeout

ROOT = Path(__file__).resolve().parents[2]


def _unconfirmed(redis_url: str) -> str:
    return f"{redis_url.split('?')[0]}?wait_replicas=1&wait_ms=50"


@pytest.mark.parametrize("kind", ["grant", "adjustment"])
def test_an_unconfirmed_entry_is_an_unknown_outcome_and_its_retry_applies_once(
    redis_url: str, kind: str
) -> None:
    config = load_config(ROOT / "config" / "gateway.toml")
    store = RedisStore(_unconfirmed(redis_url), prefix=f"t{uuid.uuid4().hex[:8]}:")
    entry_id = f"inv-{kind}"

    async def scenario() -> None:
        await store.open()
        try:
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
            retried = await add_entry(
                store, config, "default", kind=kind, amount="7", reason="x", entry_id=entry_id
            )
            assert retried.created is False and retried.entry.amount_units == 70_000
            assert (await store.wallet("default")).balance_units == 70_000
        finally:
            await store.close()

    asyncio.run(scenario())
