"""`gateway store migrate`: a Redis store written in the previous key layout (`LegacyKeys`:
``wallet:{tenant}``-style names, a global queue and global sweep zsets) moved, in place, to the
layout of keys.py, where every tenant's keys share a hash slot.

Run it with every gateway process of the previous version stopped (it writes what they would
read). Each old key is copied to its new name (DUMP, then RESTORE with its TTL, replacing), what
the new layout keeps beside it is written (the tenant's sets, the task's listing indexes and
queue entry, the tenant's registration), and only then is the old key deleted. Interrupted
anywhere, a rerun finds the old key still there and does the same again; run twice, the second
run finds nothing left to do. The global keys go last, once everything they name has moved.

What the new layout files under a tenant but the old one kept without naming it:

- a rate bucket: its API key's tenant (a bucket of a key that is gone is dropped: absent, it
  reads full);
- an idempotency record: a task create's names its task (whose tenant is known); a completed
  chat reply names its call, whose tenant is the one whose ledger has the call's charge (the
  ledgers' entries of the last `REPLY_HORIZON_DAYS` are read for that); a chat reply of a call
  that charged nothing, and a record still in flight, are dropped (the next call with that
  key runs again);
- `done:{call}` markers and `task_fence:{task}` fences are dropped: they only matter for calls
  and creates in flight, and there are none while the gateways are stopped.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from gateway.store.redis.codec import decode_entry, text
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import LegacyKeys, RedisKeys
from gateway.store.redis.task_index import INDEX_VERSION
from gateway.store.redis.tasks import RECHECK_SECONDS

if TYPE_CHECKING:
    from gateway.store.redis.store import RedisStore

__all__ = ["REPLY_HORIZON_DAYS", "MigrationReport", "migrate_layout"]

REPLY_HORIZON_DAYS = 7
"""How far back the ledgers are read to find the tenant of a stored chat reply."""

_expiry_entry = msgspec.msgpack.Decoder(tuple[str, str, str, str])


@dataclass
class MigrationReport:
    """What moved and what was dropped, by kind of key."""

    moved: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)

    def lines(self) -> list[str]:
        if not self.moved and not self.dropped:
            return ["nothing to migrate: the store is in the current layout"]
        moved = [f"moved {kind}: {n}" for kind, n in sorted(self.moved.items())]
        dropped = [f"dropped {kind}: {n}" for kind, n in sorted(self.dropped.items())]
        return [*moved, *dropped]


class _Migration:
    def __init__(self, store: RedisStore, now: float) -> None:
        self.store, self.client = store, store.client
        self.keys: RedisKeys = store.keys
        self.old = LegacyKeys(store.keys.prefix)
        self.now = now
        self.report = MigrationReport()
        self.found: dict[str, list[str]] = {}
        self.task_tenant: dict[str, str] = {}
        self.tenants: set[str] = set()

    async def run(self) -> MigrationReport:
        with store_errors:
            await self._collect()
            await self._tenant_keys()
            await self._tasks()
            await self._expiry()
            await self._rates()
            await self._idempotency()
            await self._artifacts()
            await self._drop(("done", "task_fence"))
            await self._globals()
        return self.report

    async def _collect(self) -> None:
        """Every old key by kind; and the tasks already moved (an interrupted run)."""
        k = self.keys
        async for raw in self.client.scan_iter(match=self.old.pattern(), count=1000):
            name = text(raw)
            kind = self.old.kind_of(name)
            if kind is not None:
                self.found.setdefault(kind[0], []).append(kind[1])
            elif name.startswith(f"{k.prefix}{{t:") and "}:task:" in name:
                tenant, task_id = k.task_id_of(name)
                self.task_tenant[task_id] = tenant

    def _of(self, kind: str) -> list[str]:
        return sorted(self.found.get(kind, []))

    async def _move(self, old: str, new: str) -> bool:
        """`old`'s value and TTL under `new` (replaced); False when `old` is gone."""
        dump = await self.client.dump(old)
        if dump is None:
            return False
        ttl = int(await self.client.pttl(old))
        await self.client.restore(new, max(ttl, 0), dump, replace=True)
        return True

    async def _tenant_keys(self) -> None:
        k = self.keys
        new_key = {
            "wallet": k.wallet,
            "ledger": k.ledger,
            "ledger_order": k.ledger_order,
            "holds": k.holds,
            "hold_expiry": k.hold_expiry,
            "tenant_keys": k.tenant_keys,
            "tenant_tasks": k.tenant_tasks,
            "task_seq": k.task_seq,
        }
        for kind in LegacyKeys.TENANT_KINDS:
            for tenant in self._of(kind):
                self.tenants.add(tenant)
                old = self.old.key(kind, tenant)
                if await self._move(old, new_key[kind](tenant)):
                    await self.client.delete(old)
                    self.report.moved[kind] += 1

    async def _tasks(self) -> None:
        old_unconfirmed = self.old.global_key("tasks_unconfirmed")
        for task_id in self._of("task"):
            old = self.old.key("task", task_id)
            tenant = await self.client.hget(old, "tenant")
            if tenant is None:  # not a task hash (or gone)
                await self.client.delete(old)
                self.report.dropped["task"] += 1
                continue
            tenant_name = text(tenant)
            new = self.keys.task(tenant_name, task_id)
            if not await self._move(old, new):
                continue
            since = await self.client.zscore(old_unconfirmed, task_id)
            await self._file_task(tenant_name, task_id, since)
            await self.client.delete(old)
            self.task_tenant[task_id] = tenant_name
            self.report.moved["task"] += 1

    async def _file_task(self, tenant: str, task_id: str, unconfirmed_since: float | None) -> None:
        """What the new layout keeps beside a task: registration, sets, indexes, queue."""
        k, client, store = self.keys, self.client, self.store
        new = k.task(tenant, task_id)
        status, unconfirmed, capability, created = await client.hmget(
            new, ["status", "unconfirmed", "capability", "created_at"]
        )
        cap = text(capability or b"")
        await client.hdel(new, "entry")
        registry = k.shard_tenants(k.shard_of(tenant))
        await client.zadd(registry, {tenant: 0}, nx=True)
        if unconfirmed is not None:
            since = unconfirmed_since if unconfirmed_since is not None else float(created or 0)
            await client.zadd(k.tasks_unconfirmed(tenant), {task_id: since})
        elif status in (b"queued", b"running"):
            await client.hset(new, "shard", k.shard_of(tenant))
            await client.zadd(k.tasks_open(tenant), {task_id: self.now + RECHECK_SECONDS})
            await store._enqueue(tenant, task_id, cap)
        await store._s.task_reindex(
            keys=(new, k.task_expiry(tenant), *k.task_index_block(tenant, cap)),
            args=(store._retention_ms(), cap),
        )

    async def _expiry(self) -> None:
        """The global retention zset, member by member into its tenant's."""
        old = self.old.global_key("task_expiry")
        while True:
            members: Any = await self.client.zrange(old, 0, 499, withscores=True)
            if not members:
                return
            for member, at in members:
                task_id, tenant, _, _ = _expiry_entry.decode(member)
                await self.client.zadd(self.keys.task_expiry(tenant), {member: at})
                await self.client.zrem(old, member)
                self.task_tenant.setdefault(task_id, tenant)
                self.report.moved["task_expiry"] += 1

    async def _rates(self) -> None:
        for key_id in self._of("rate"):
            old = self.old.key("rate", key_id)
            key_hash = await self.client.get(self.keys.api_key_id(key_id))
            tenant = None
            if key_hash is not None:
                tenant = await self.client.hget(self.keys.legacy_api_key(text(key_hash)), "tenant")
            if tenant is not None and await self._move(old, self.keys.rate(text(tenant), key_id)):
                self.report.moved["rate"] += 1
            else:
                self.report.dropped["rate"] += 1
            await self.client.delete(old)

    async def _idempotency(self) -> None:
        scopes = self._of("idem")
        records = {}
        for scope in scopes:
            call, task, reply = await self.client.hmget(
                self.old.key("idem", scope), ["call", "task", "reply"]
            )
            records[scope] = (text(call) if call else "", text(task) if task else "", reply)
        wanted = {call for call, task, reply in records.values() if call and reply is not None}
        charged = await self._charged_calls(wanted) if wanted else {}
        for scope, (call, task, reply) in records.items():
            old = self.old.key("idem", scope)
            tenant = self.task_tenant.get(task) if task else None
            if tenant is None and call and reply is not None:
                tenant = charged.get(call)
            if tenant is not None and await self._move(old, self.keys.idempotency(tenant, scope)):
                self.report.moved["idem"] += 1
            else:
                self.report.dropped["idem"] += 1
            await self.client.delete(old)

    async def _charged_calls(self, wanted: set[str]) -> dict[str, str]:
        """call id -> tenant, from the charges of the last `REPLY_HORIZON_DAYS` (newest first)."""
        since = self.now - REPLY_HORIZON_DAYS * 86_400
        found: dict[str, str] = {}
        for tenant in sorted(self.tenants | set(self.task_tenant.values())):
            order, ledger, start = self.keys.ledger_order(tenant), self.keys.ledger(tenant), 0
            while len(found) < len(wanted):
                ids: Any = await self.client.zrevrange(order, start, start + 499)
                if not ids:
                    break
                start += len(ids)
                packed: Any = await self.client.hmget(ledger, ids)
                entries = [decode_entry(p) for p in packed if p is not None]
                for entry in entries:
                    call = entry.id.removeprefix("charge:")
                    if entry.kind == "charge" and call in wanted:
                        found[call] = tenant
                if not entries or entries[-1].created_at < since:
                    break
        return found

    async def _artifacts(self) -> None:
        old_expiry = self.old.global_key("artifact_expiry")
        for artifact_id in self._of("artifact"):
            old = self.old.key("artifact", artifact_id)
            at = await self.client.zscore(old_expiry, artifact_id)
            if at is None:
                raw: Any = await self.client.get(old)
                at = msgspec.msgpack.decode(raw)["expires_at"] if raw is not None else None
            if at is None or not await self._move(old, self.keys.artifact(artifact_id)):
                continue
            await self.client.zadd(self.keys.artifact_expiry_of(artifact_id), {artifact_id: at})
            await self.client.delete(old)
            self.report.moved["artifact"] += 1

    async def _drop(self, kinds: Iterable[str]) -> None:
        for kind in kinds:
            for rest in self._of(kind):
                await self.client.delete(self.old.key(kind, rest))
                self.report.dropped[kind] += 1

    async def _globals(self) -> None:
        """The old indexes (every task was indexed anew) and the global keys, last."""
        for rest in self._of("task_index"):
            await self.client.delete(self.old.key("task_index", rest))
            self.report.dropped["task_index"] += 1
        for kind in LegacyKeys.GLOBALS:
            if kind in self.found:
                await self.client.delete(self.old.global_key(kind))
                self.report.dropped[kind] += 1
        if self.report.moved["task"]:
            await self.client.set(self.keys.task_index_version(), INDEX_VERSION)


async def migrate_layout(store: RedisStore, *, now: float | None = None) -> MigrationReport:
    """Move what `store`'s prefix holds in the previous layout to the current one (see the
    module docstring); what moved and what was dropped."""
    return await _Migration(store, time.time() if now is None else now).run()
