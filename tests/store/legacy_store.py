"""A store of the previous Redis key layout, filled as a gateway of the previous version filled
it: its own scripts (tests/store/legacy_layout/*.lua, copied from the last version that wrote
that layout) run with its own key formats (`_LegacyNames`, copied too). Only the migration test
uses it: nothing here is the gateway's code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from redis.asyncio import Redis

from gateway.store.base import ApiKeyRecord, ArtifactRecord, Call, StoredReply

__all__ = ["LegacyStore"]

_SCRIPTS = Path(__file__).parent / "legacy_layout"
_GROUP = "workers"
_DONE_TTL = 86_400
_RETENTION_MS = 30 * 86_400_000


def _source(name: str) -> str:
    helpers = ("common", "task_common") if name.startswith("task_") else ("common",)
    parts = [(_SCRIPTS / f"{part}.lua").read_text() for part in (*helpers, name)]
    return "\n".join(parts)


class _LegacyNames:
    """The previous `RedisKeys` (the formats it built)."""

    def __init__(self, prefix: str) -> None:
        self.p = prefix

    def __getattr__(self, kind: str) -> Any:
        return lambda rest="": f"{self.p}{kind}:{rest}"

    def glob(self, name: str) -> str:
        return f"{self.p}{name}"

    def index_template(self) -> str:
        return f"{self.p}task_index:\0s:\0c:\0t"


class LegacyStore:
    """The operations the migration test needs, as the previous version ran them."""

    def __init__(self, client: Redis, prefix: str) -> None:
        self.client, self.k = client, _LegacyNames(prefix)
        self.s = {
            name: client.register_script(_source(name))
            for name in (
                "admit",
                "settle",
                "grant",
                "task_create",
                "task_confirm",
                "task_claim",
                "task_finalize",
            )
        }

    async def create_key(self, record: ApiKeyRecord, key_hash: str) -> None:
        k, c = self.k, self.client
        await c.hset(
            k.apikey(key_hash),
            mapping={
                "key_id": record.key_id,
                "tenant": record.tenant,
                "created_at": record.created_at,
            },
        )
        await c.set(k.apikey_id(record.key_id), key_hash)
        await c.zadd(k.tenant_keys(record.tenant), {key_hash: record.created_at})

    async def grant(self, tenant: str, units: int, entry_id: str) -> None:
        k = self.k
        await self.s["grant"](
            keys=(k.wallet(tenant), k.ledger(tenant), k.ledger_order(tenant)),
            args=(entry_id, tenant, "grant", units, "top-up"),
        )

    async def admit(self, call: Call, hold: int) -> None:
        k, claim = self.k, call.idempotency
        await self.s["admit"](
            keys=(
                k.rate(call.api_key_id),
                k.idem(claim.scope if claim else ""),
                k.holds(call.tenant),
                k.hold_expiry(call.tenant),
                k.wallet(call.tenant),
                k.done(call.call_id),
            ),
            args=(
                call.limits.requests_per_minute,
                call.limits.tokens_per_minute,
                call.tokens_reserved,
                hold,
                900,
                1 if claim else 0,
                claim.fingerprint if claim else "",
                f"hold:{call.call_id}",
                claim.lease_seconds if claim else 0,
                call.call_id,
                _DONE_TTL,
            ),
        )

    async def settle(self, call: Call, charge: int, reply: StoredReply | None) -> None:
        k, claim, t = self.k, call.idempotency, call.tenant
        await self.s["settle"](
            keys=(
                k.holds(t),
                k.hold_expiry(t),
                k.wallet(t),
                k.ledger(t),
                k.ledger_order(t),
                k.rate(call.api_key_id),
                k.idem(claim.scope if claim else ""),
                k.done(call.call_id),
            ),
            args=(
                f"hold:{call.call_id}",
                charge,
                f"charge:{call.call_id}",
                t,
                "chat",
                call.request_id,
                call.limits.requests_per_minute,
                call.limits.tokens_per_minute,
                call.tokens_reserved,
                0,
                0 if claim is None else (2 if reply is not None else 1),
                claim.fingerprint if claim else "",
                call.call_id,
                msgspec.msgpack.encode(reply) if reply is not None else b"",
                86_400,
                _DONE_TTL,
                "chat-model",
            ),
        )

    def _task_keys(self, task_id: str) -> tuple[str, str, str]:
        k = self.k
        return k.task(task_id), k.glob("task_queue"), k.glob("tasks_queued")

    def _task_args(self) -> tuple[str, str, str, str]:
        k = self.k
        return _GROUP, k.wallet(), k.ledger(), k.ledger_order()

    async def create_task(
        self, task_id: str, tenant: str, price: int, capability: str, scope: str = ""
    ) -> None:
        k = self.k
        static = {
            "task_id": task_id,
            "tenant": tenant,
            "api_key_id": "k1",
            "request_id": f"req_{task_id}",
            "capability": capability,
            "model": "auto",
            "resolved_model": "image-model-2",
            "price_units": price,
            "input": msgspec.msgpack.encode({"prompt": task_id}),
            "metadata": msgspec.msgpack.encode({}),
        }
        await self.s["task_create"](
            keys=(
                *self._task_keys(task_id),
                k.rate("k1"),
                k.idem(scope),
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.task_seq(tenant),
                k.task_fence(task_id),
                k.glob("tasks_unconfirmed"),
            ),
            args=(
                *self._task_args(),
                1000,
                0,
                1 if scope else 0,
                "fp-task" if scope else "",
                86_400,
                task_id,
                tenant,
                price,
                f"hold:{task_id}",
                900,
                k.task(),
                scope,
                *(v for pair in static.items() for v in pair),
            ),
        )

    async def confirm_task(self, task_id: str, tenant: str) -> None:
        k = self.k
        await self.s["task_confirm"](
            keys=(
                *self._task_keys(task_id),
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.glob("tasks_unconfirmed"),
                k.glob("task_expiry"),
                k.tenant_tasks(tenant),
            ),
            args=(
                *self._task_args(),
                tenant,
                f"hold:{task_id}",
                f"debit:{task_id}",
                k.index_template(),
                _RETENTION_MS,
            ),
        )

    async def claim_next(self, worker: str) -> str:
        """The next entry of the queue, claimed by `worker` (a lease of an hour)."""
        k = self.k
        queue = k.glob("task_queue")
        try:
            await self.client.xgroup_create(queue, _GROUP, id="0", mkstream=True)
        except Exception as exc:  # BUSYGROUP: made before
            if "BUSYGROUP" not in str(exc):
                raise
        [(_, [(entry, fields)])] = await self.client.xreadgroup(
            _GROUP, worker, {queue: ">"}, count=1
        )
        task_id = fields[b"task"].decode()
        await self.s["task_claim"](
            keys=(*self._task_keys(task_id), k.glob("task_expiry")),
            args=(
                *self._task_args(),
                entry,
                worker,
                3600,
                3,
                f"refund:{task_id}",
                "worker_lost",
                msgspec.msgpack.encode({"code": "worker_lost"}),
                k.index_template(),
                _RETENTION_MS,
            ),
        )
        return task_id

    async def finalize(self, task_id: str, status: str, refund: int) -> None:
        k = self.k
        empty = msgspec.msgpack.encode({})
        await self.s["task_finalize"](
            keys=(*self._task_keys(task_id), k.glob("task_expiry")),
            args=(
                *self._task_args(),
                status,
                refund,
                f"refund:{task_id}",
                "done",
                empty,
                empty,
                msgspec.msgpack.encode([]),
                0,
                b"",
                k.index_template(),
                _RETENTION_MS,
            ),
        )

    async def create_artifact(self, record: ArtifactRecord) -> None:
        k = self.k
        await self.client.set(k.artifact(record.artifact_id), msgspec.msgpack.encode(record))
        await self.client.zadd(k.glob("artifact_expiry"), {record.artifact_id: record.expires_at})
