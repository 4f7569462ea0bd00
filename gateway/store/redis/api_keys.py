"""The Redis store's API-key area: a key's record lives in its tenant's hash slot.

A secret ends with a slot tag (`gateway.store.key_tags`) in the slot of its tenant's keys, so
its record (``{<tag>}:apikey:<hash>``) is found from the secret alone, next to the tenant's
wallet, holds and spend: one call of a tenant reads one slot. The tenant's ``{<tag>}:apikey_ids``
index names each key's current (and previous) secret in the same slot, so an update, a
rotation or a revocation is one MULTI or script there. Only the pointers to the tag live
elsewhere, written first and never changed: the id's (``apikey_id:<id>``) and the secret
hash's (``apikey_tag:<hash>``, for a secret without a tag: one issued before tags); a create
cut short leaves a pointer that leads nowhere (read as absent). A record of the previous
layout (``apikey:<hash>``, no tag) is moved to its tenant's slot the first time anything
reads it (docs/store.md, "API keys").
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec
from redis.asyncio import Redis, RedisCluster
from redis.typing import EncodableT, FieldT

from gateway.store.base import ApiKeyRecord, KeySettings
from gateway.store.key_tags import tenant_tag
from gateway.store.periods import BudgetPeriod
from gateway.store.redis.codec import KEY_FIELDS, encode_settings, key_record, text
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys

if TYPE_CHECKING:
    from collections.abc import Sequence

    from redis.commands.core import AsyncScript

    from gateway.store.redis.scripts import Scripts

__all__ = ["RedisKeyArea"]

_NONE = "-"
"""The hash named for 'no previous secret' (a key no script writes)."""


class RedisKeyArea:
    """The API-key operations of `RedisStore` (a mixin: the store has the client)."""

    keys: RedisKeys

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis | RedisCluster: ...
        @property
        def _s(self) -> Scripts: ...
        async def _eval(
            self, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]
        ) -> Any: ...
        async def _command_hot(self, key: str, *args: Any) -> Any: ...

    async def create_key(self, record: ApiKeyRecord, key_hash: str) -> None:
        k, tag = self.keys, tenant_tag(record.tenant)
        fields: dict[FieldT, EncodableT] = {
            "key_id": record.key_id,
            "tenant": record.tenant,
            "created_at": record.created_at,
            "prefix": record.prefix,
        }
        if record.revoked_at is not None:
            fields["revoked_at"] = record.revoked_at
        settings = encode_settings(record.settings)
        if settings:
            fields["settings"] = settings
        with store_errors:
            await self.client.set(k.api_key_id(record.key_id), tag)
            await self.client.set(k.api_key_tag(key_hash), tag)
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.zadd(k.tenant_keys(record.tenant), {key_hash: record.created_at})
                pipe.hset(k.api_key_index(tag), record.key_id, key_hash)
                pipe.delete(k.api_key(tag, key_hash))
                pipe.hset(k.api_key(tag, key_hash), mapping=fields)
                await pipe.execute()

    async def get_key(self, key_hash: str, tag: str | None = None) -> ApiKeyRecord | None:
        """Every call's lookup: through the pipelined client, on the master of the record's
        slot only, so a fault elsewhere in a cluster never touches it."""
        if tag is None:
            pointer = self.keys.api_key_tag(key_hash)
            found = await self._command_hot(pointer, "GET", pointer)
            if found is None:
                return await self._move_legacy(key_hash)
            tag = text(found)
        record = self.keys.api_key(tag, key_hash)
        return key_record(await self._command_hot(record, "HMGET", record, *KEY_FIELDS))

    async def key_by_id(self, key_id: str) -> ApiKeyRecord | None:
        found = await self._secret_of(key_id)
        if found is None:
            return None
        tag, key_hash, _ = found
        with store_errors:
            fields = await self.client.hmget(self.keys.api_key(tag, key_hash), KEY_FIELDS)
        record = key_record(fields)
        return (await self._with_last_use(record.tenant, [record]))[0] if record else None

    async def revoke_key(self, key_id: str) -> bool:
        found = await self._secret_of(key_id)
        if found is None:
            return False
        tag, key_hash, previous = found
        with store_errors:
            now = repr(time.time())
            # HSETNX keeps the first revocation time: revoking twice changes nothing.
            async with self.client.pipeline(transaction=True) as pipe:
                for h in (key_hash, previous) if previous else (key_hash,):
                    pipe.hsetnx(self.keys.api_key(tag, h), "revoked_at", now)
                await pipe.execute()
        return True

    async def update_key(self, key_id: str, settings: KeySettings) -> ApiKeyRecord | None:
        found = await self._secret_of(key_id)
        if found is None:
            return None
        tag, key_hash, previous = found
        blob = encode_settings(settings)
        with store_errors:
            async with self.client.pipeline(transaction=True) as pipe:
                for h in (key_hash, previous) if previous else (key_hash,):
                    record = self.keys.api_key(tag, h)
                    # The old secret's record only while it is there (it may have expired).
                    if h == previous and not await self.client.exists(record):
                        continue
                    if blob:
                        pipe.hset(record, "settings", blob)
                    else:
                        pipe.hdel(record, "settings")
                await pipe.execute()
        return await self.key_by_id(key_id)

    async def rotate_key(
        self, key_id: str, key_hash: str, prefix: str, *, grace_seconds: float
    ) -> ApiKeyRecord | None:
        for _ in range(3):  # a concurrent rotation moved the secret: once more
            found = await self._secret_of(key_id)
            if found is None:
                return None
            tag, current, previous = found
            k = self.keys
            record = await self.key_by_id(key_id)
            if record is None:
                return None
            res = await self._eval(
                self._s.key_rotate,
                (
                    k.api_key_index(tag),
                    k.api_key(tag, current),
                    k.api_key(tag, key_hash),
                    k.api_key(tag, previous or _NONE),
                    k.tenant_keys(record.tenant),
                ),
                (key_id, current, key_hash, prefix, grace_seconds, previous or ""),
            )
            outcome = text(res)
            if outcome == "revoked":
                return None
            if outcome == "ok":
                with store_errors:
                    await self.client.set(k.api_key_tag(key_hash), tag)
                return await self.key_by_id(key_id)
        return None

    async def key_spent(self, tenant: str, key_id: str, period: BudgetPeriod) -> int:
        spent, _ = await self._eval(
            self._s.key_state, (self.keys.wallet(tenant),), (key_id, period)
        )
        return int(spent)

    async def list_keys(self, tenant: str) -> list[ApiKeyRecord]:
        tag = tenant_tag(tenant)
        with store_errors:
            hashes = await self.client.zrange(self.keys.tenant_keys(tenant), 0, -1)
            if not hashes:
                return []
            async with self.client.pipeline(transaction=False) as pipe:
                for key_hash in hashes:
                    pipe.hmget(self.keys.api_key(tag, text(key_hash)), KEY_FIELDS)
                rows = await pipe.execute()
        records: list[ApiKeyRecord] = []
        for key_hash, fields in zip(hashes, rows, strict=True):
            record = key_record(fields)
            if record is None:  # a key of the previous layout, not moved yet
                record = await self._move_legacy(text(key_hash))
            if record is not None and record.tenant == tenant:
                records.append(record)
        return await self._with_last_use(tenant, records)

    async def _with_last_use(self, tenant: str, records: list[ApiKeyRecord]) -> list[ApiKeyRecord]:
        if not records:
            return records
        with store_errors:
            used = await self.client.hmget(
                self.keys.wallet(tenant), [f"u:{r.key_id}" for r in records]
            )
        return [
            msgspec.structs.replace(r, last_used_at=float(u)) if u is not None else r
            for r, u in zip(records, used, strict=True)
        ]

    async def _secret_of(self, key_id: str) -> tuple[str, str, str | None] | None:
        """(tag, current secret's hash, previous secret's hash or None) of a key."""
        with store_errors:
            pointer = await self.client.get(self.keys.api_key_id(key_id))
            if pointer is None:
                return None
            tag = text(pointer)
            if not tag.startswith("k"):  # the previous layout: the pointer is the hash
                record = await self._move_legacy(tag)
                if record is None:
                    return None
                tag = tenant_tag(record.tenant)
            current, previous = await self.client.hmget(
                self.keys.api_key_index(tag), [key_id, f"{key_id}:prev"]
            )
        if current is None:
            return None
        return tag, text(current), text(previous) if previous is not None else None

    async def _move_legacy(self, key_hash: str) -> ApiKeyRecord | None:
        """Move a record of the previous layout to its tenant's slot (idempotent: a second
        mover finds it gone, and the pointer it reads then leads to the moved one)."""
        k = self.keys
        with store_errors:
            fields = await self.client.hmget(k.legacy_api_key(key_hash), KEY_FIELDS)
            record = key_record(fields)
            if record is None:
                found = await self.client.get(k.api_key_tag(key_hash))
                if found is None:
                    return None
                fields = await self.client.hmget(k.api_key(text(found), key_hash), KEY_FIELDS)
                return key_record(fields)
            tag = tenant_tag(record.tenant)
            await self.client.set(k.api_key_id(record.key_id), tag)
            await self.client.set(k.api_key_tag(key_hash), tag)
            moved: dict[FieldT, EncodableT] = {
                name: value
                for name, value in zip(KEY_FIELDS, fields, strict=True)
                if value is not None
            }
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hset(k.api_key(tag, key_hash), mapping=moved)
                pipe.hsetnx(k.api_key_index(tag), record.key_id, key_hash)
                await pipe.execute()
            await self.client.delete(k.legacy_api_key(key_hash))
        return record
