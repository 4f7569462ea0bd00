"""`RedisStore`: the store on Redis, each atomic operation one Lua script (one round trip).

Scripts use Redis server time, so gateway replicas sharing one Redis agree on every bucket,
lease and hold; `codec.py` decodes what they return. Connection failures and timeouts become
`StoreUnavailable` at this boundary.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT, FieldT

from gateway.errors import StoreUnavailable
from gateway.store.base import (
    Admission,
    AdmissionResult,
    ApiKeyRecord,
    LedgerEntry,
    LedgerKind,
    LedgerPage,
    Release,
    Settlement,
    Wallet,
)
from gateway.store.ledger_ids import charge_id, hold_id
from gateway.store.redis.artifacts import RedisArtifactArea
from gateway.store.redis.codec import (
    KEY_FIELDS,
    admission_result,
    decode_entry,
    encode_reply,
    key_record,
    text,
)
from gateway.store.redis.keys import RedisKeys
from gateway.store.redis.pipeline import LuaScript, ScriptPipeline
from gateway.store.redis.scripts import Scripts, script_source
from gateway.store.redis.tasks import RedisTaskArea

__all__ = ["RedisStore"]

_DONE_TTL_SECONDS = 86_400
"""How long a settled/released call is remembered, so its tokens are reconciled only once."""

_STORE_ERRORS = (RedisConnectionError, RedisTimeoutError)

_PIPELINED_SCHEMES = ("redis://", "unix://")
"""URLs the hot-path pipeline serves; others (rediss://, TLS) keep redis-py for every call."""


class _HotScripts:
    """The request path's scripts, for `ScriptPipeline` (same sources as `Scripts`)."""

    __slots__ = ("admit", "release", "settle")

    def __init__(self) -> None:
        self.admit = LuaScript.of(script_source("admit"))
        self.settle = LuaScript.of(script_source("settle"))
        self.release = LuaScript.of(script_source("release"))


class RedisStore(RedisTaskArea, RedisArtifactArea):
    """The `gateway.store.base.Store` on Redis (redis-py asyncio, one connection pool).

    `admit`, `settle` and `release`, two of which every request makes, go through a
    `ScriptPipeline` instead: one pipelined connection, a fraction of redis-py's CPU per call.
    `open()` does not contact Redis, so the gateway can start while Redis is briefly away;
    `ping()` tells. `prefix` namespaces every key (several gateways or test runs, one Redis).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "gw:",
        socket_timeout: float = 2.0,
        connect_timeout: float = 1.0,
        retries: int = 1,
        max_connections: int = 64,
    ) -> None:
        self.url = url
        self.keys = RedisKeys(prefix)
        self._options: dict[str, Any] = {
            "decode_responses": False,
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": connect_timeout,
            # One quick retry covers a pooled connection the server closed; more would only
            # delay the 503 a client can retry itself.
            "retry": Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.05), retries),
            # A bounded pool: a burst waits briefly for a connection instead of failing.
            "max_connections": max_connections,
            "timeout": socket_timeout,
        }
        self._client: Redis | None = None
        self._scripts: Scripts | None = None
        self._socket_timeout, self._connect_timeout = socket_timeout, connect_timeout
        self._pipeline: ScriptPipeline | None = None
        self._hot = _HotScripts()

    async def open(self) -> None:
        if self._client is None:
            pool = BlockingConnectionPool.from_url(self.url, **self._options)
            self._client = Redis.from_pool(pool)
            self._scripts = Scripts(self._client)
            if self.url.startswith(_PIPELINED_SCHEMES):
                self._pipeline = ScriptPipeline(
                    self.url,
                    socket_timeout=self._socket_timeout,
                    connect_timeout=self._connect_timeout,
                )

    async def close(self) -> None:
        client, self._client, self._scripts = self._client, None, None
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            await pipeline.close()
        await self._close_task_queue()
        if client is not None:
            await client.aclose()

    async def ping(self) -> bool:
        if self._client is None:
            return False
        try:
            return bool(await self._client.ping())
        except Exception:
            return False

    @property
    def client(self) -> Redis:
        """The open client (for maintenance and tests); RuntimeError before `open()`."""
        if self._client is None:
            raise RuntimeError("RedisStore is not open")
        return self._client

    @property
    def _s(self) -> Scripts:
        if self._scripts is None:
            raise RuntimeError("RedisStore is not open")
        return self._scripts

    async def _eval(self, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return await script(keys=keys, args=args)
        except _STORE_ERRORS as exc:
            raise StoreUnavailable() from exc

    async def _eval_hot(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """A request-path script: through the pipeline, or redis-py when there is none."""
        pipeline = self._pipeline
        if pipeline is None:
            return await self._eval(getattr(self._s, name), keys, args)
        try:
            return await pipeline.evalsha(getattr(self._hot, name), keys, args)
        except _STORE_ERRORS as exc:
            raise StoreUnavailable() from exc

    # API keys ------------------------------------------------------------------------------

    async def create_key(self, record: ApiKeyRecord, key_hash: str) -> None:
        k = self.keys
        fields: dict[FieldT, EncodableT] = {
            "key_id": record.key_id,
            "tenant": record.tenant,
            "created_at": record.created_at,
        }
        if record.revoked_at is not None:
            fields["revoked_at"] = record.revoked_at
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(k.api_key(key_hash))
                pipe.hset(k.api_key(key_hash), mapping=fields)
                pipe.set(k.api_key_id(record.key_id), key_hash)
                pipe.zadd(k.tenant_keys(record.tenant), {key_hash: record.created_at})
                await pipe.execute()
        except _STORE_ERRORS as exc:
            raise StoreUnavailable() from exc

    async def get_key(self, key_hash: str) -> ApiKeyRecord | None:
        try:
            fields = await self.client.hmget(self.keys.api_key(key_hash), KEY_FIELDS)
        except _STORE_ERRORS as exc:
            raise StoreUnavailable() from exc
        return key_record(fields)

    async def revoke_key(self, key_id: str) -> bool:
        try:
            key_hash = await self.client.get(self.keys.api_key_id(key_id))
            if key_hash is None:
                return False
            # HSETNX keeps the first revocation time: revoking twice changes nothing.
            await self.client.hsetnx(
                self.keys.api_key(text(key_hash)), "revoked_at", repr(time.time())
            )
        except _STORE_ERRORS as exc:
            raise StoreUnavailable() from exc
        return True

    async def list_keys(self, tenant: str) -> list[ApiKeyRecord]:
        try:
            hashes = await self.client.zrange(self.keys.tenant_keys(tenant), 0, -1)
            if not hashes:
                return []
            async with self.client.pipeline(transaction=False) as pipe:
                for key_hash in hashes:
                    pipe.hmget(self.keys.api_key(text(key_hash)), KEY_FIELDS)
                rows = await pipe.execute()
        except _STORE_ERRORS as exc:
            raise StoreUnavailable() from exc
        records = (key_record(fields) for fields in rows)
        return [r for r in records if r is not None and r.tenant == tenant]

    # Request path -------------------------------------------------------------------------

    async def admit(self, admission: Admission) -> AdmissionResult:
        k, limits, claim = self.keys, admission.limits, admission.idempotency
        tenant = admission.tenant
        res = await self._eval_hot(
            "admit",
            (
                k.rate(admission.api_key_id),
                k.idempotency(claim.scope if claim else ""),
                k.holds(tenant),
                k.hold_expiry(tenant),
                k.wallet(tenant),
                k.done(admission.call_id),
            ),
            (
                limits.requests_per_minute,
                limits.tokens_per_minute,
                admission.tokens,
                admission.hold_units,
                admission.hold_seconds,
                1 if claim else 0,
                claim.fingerprint if claim else "",
                hold_id(admission.call_id),
                claim.lease_seconds if claim else 0,
                admission.call_id,
            ),
        )
        return admission_result(res, limits, admission.tokens)

    async def settle(self, settlement: Settlement) -> int:
        k, s, claim = self.keys, settlement, settlement.idempotency
        mode = 0 if claim is None else (2 if s.reply is not None else 1)
        reply = encode_reply(s.reply) if s.reply is not None else b""
        balance: int = await self._eval_hot(
            "settle",
            (
                k.holds(s.tenant),
                k.hold_expiry(s.tenant),
                k.wallet(s.tenant),
                k.ledger(s.tenant),
                k.ledger_order(s.tenant),
                k.rate(s.api_key_id),
                k.idempotency(claim.scope if claim else ""),
                k.done(s.call_id),
            ),
            (
                hold_id(s.call_id),
                s.charge_units,
                charge_id(s.call_id),
                s.tenant,
                s.reason,
                s.request_id,
                s.limits.requests_per_minute,
                s.limits.tokens_per_minute,
                s.tokens_reserved,
                s.tokens_used,
                mode,
                claim.fingerprint if claim else "",
                s.call_id,
                reply,
                s.reply_ttl_seconds,
                _DONE_TTL_SECONDS,
            ),
        )
        return balance

    async def release(self, release: Release) -> None:
        k, r, claim = self.keys, release, release.idempotency
        await self._eval_hot(
            "release",
            (
                k.holds(r.tenant),
                k.hold_expiry(r.tenant),
                k.rate(r.api_key_id),
                k.idempotency(claim.scope if claim else ""),
                k.done(r.call_id),
            ),
            (
                hold_id(r.call_id),
                r.limits.requests_per_minute,
                r.limits.tokens_per_minute,
                r.tokens_reserved,
                1 if claim else 0,
                r.call_id,
                _DONE_TTL_SECONDS,
            ),
        )

    # Wallet -------------------------------------------------------------------------------

    async def grant(
        self,
        tenant: str,
        amount_units: int,
        *,
        entry_id: str,
        reason: str,
        kind: LedgerKind = "grant",
    ) -> LedgerEntry:
        k = self.keys
        packed = await self._eval(
            self._s.grant,
            (k.wallet(tenant), k.ledger(tenant), k.ledger_order(tenant)),
            (entry_id, tenant, kind, amount_units, reason),
        )
        return decode_entry(packed)

    async def wallet(self, tenant: str) -> Wallet:
        k = self.keys
        balance, held = await self._eval(
            self._s.wallet, (k.holds(tenant), k.hold_expiry(tenant), k.wallet(tenant)), ()
        )
        return Wallet(tenant=tenant, balance_units=balance, held_units=held)

    async def ledger(self, tenant: str, *, limit: int, after: str | None = None) -> LedgerPage:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        k = self.keys
        res = await self._eval(
            self._s.ledger, (k.ledger(tenant), k.ledger_order(tenant)), (limit, after or "")
        )
        entries = [decode_entry(packed) for packed in res[1:]]
        return LedgerPage(entries=entries, has_more=res[0] == 1)
