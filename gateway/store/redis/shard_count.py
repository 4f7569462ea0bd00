"""The task queue's shard count a store was written with, so that a store URL with another
`?shards=` is refused at start rather than stranding the queued tasks in shards no process
reads (docs/store.md, "Changing the shard count").

The count is kept in one unscoped key (`RedisKeys.queue_shards`). The first start that finds
none (a new store, or one written before the key existed) looks once for queue shards of
another count (a SCAN of the prefix, every master of a cluster): finding some, it leaves the key
unset and reports that count; else it records its own. `gateway store migrate` records the
count it moved the queue to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import StoreUnavailable
from gateway.store.redis.codec import text
from gateway.store.redis.errors import store_errors

if TYPE_CHECKING:
    from gateway.store.redis.store import RedisStore

__all__ = ["record_shard_count", "shard_count_refusal", "written_shard_count"]


async def written_shard_count(store: RedisStore) -> int:
    """The shard count the store's queue was written with (the store's own when it is the first
    to ask and no other count's shards are found)."""
    keys, client = store.keys, store.client
    with store_errors:
        recorded: Any = await client.get(keys.queue_shards())
        if recorded is not None:
            return int(recorded)
        async for raw in client.scan_iter(match=f"{keys.pattern()[:-1]}{{q*", count=1000):
            name = text(raw)
            if keys.other_shard_key(name) is not None:
                return int(name[len(keys.prefix) + 2 :].partition(".")[0])
        await client.set(keys.queue_shards(), keys.shards, nx=True)
        again: Any = await client.get(keys.queue_shards())
    return int(again)


async def record_shard_count(store: RedisStore) -> None:
    """The store's own count, as the one its queue is written with (after a migration)."""
    with store_errors:
        await store.client.set(store.keys.queue_shards(), store.keys.shards)


async def shard_count_refusal(store: RedisStore) -> str | None:
    """Why a process with `store`'s URL must not start (its shard count is not the queue's),
    or None; None too while Redis does not answer (a process starts without its store)."""
    try:
        written = await written_shard_count(store)
    except StoreUnavailable:
        return None
    if written == store.keys.shards:
        return None
    return (
        f"GATEWAY_STORE_URL: ?shards={store.keys.shards}, but the store's task queue has "
        f"{written} shards, whose queued tasks no process would read: stop every gateway and "
        "run `gateway store migrate` with the new URL (or use the old count)"
    )
