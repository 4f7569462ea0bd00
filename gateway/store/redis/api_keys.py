"""The Redis store's API-key area: a hash per key, an id index and a per-tenant list.

A key is looked up by its hash or its id alone, so each of the three has a slot of its own:
creating writes them one by one, the record last (replacing a record is one MULTI on its one
key). A create cut short leaves no usable key, only a list entry or an id that lead nowhere
(read as absent), and its caller never got the key.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from redis.asyncio import Redis, RedisCluster
from redis.typing import EncodableT, FieldT

from gateway.store.base import ApiKeyRecord
from gateway.store.redis.codec import KEY_FIELDS, key_record, text
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys

__all__ = ["RedisKeyArea"]


class RedisKeyArea:
    """The API-key operations of `RedisStore` (a mixin: the store has the client)."""

    keys: RedisKeys

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis | RedisCluster: ...

    async def create_key(self, record: ApiKeyRecord, key_hash: str) -> None:
        k = self.keys
        fields: dict[FieldT, EncodableT] = {
            "key_id": record.key_id,
            "tenant": record.tenant,
            "created_at": record.created_at,
            "prefix": record.prefix,
        }
        if record.revoked_at is not None:
            fields["revoked_at"] = record.revoked_at
        with store_errors:
            await self.client.zadd(k.tenant_keys(record.tenant), {key_hash: record.created_at})
            await self.client.set(k.api_key_id(record.key_id), key_hash)
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(k.api_key(key_hash))
                pipe.hset(k.api_key(key_hash), mapping=fields)
                await pipe.execute()

    async def get_key(self, key_hash: str) -> ApiKeyRecord | None:
        with store_errors:
            fields = await self.client.hmget(self.keys.api_key(key_hash), KEY_FIELDS)
        return key_record(fields)

    async def key_by_id(self, key_id: str) -> ApiKeyRecord | None:
        with store_errors:
            key_hash = await self.client.get(self.keys.api_key_id(key_id))
            if key_hash is None:
                return None
            fields = await self.client.hmget(self.keys.api_key(text(key_hash)), KEY_FIELDS)
        return key_record(fields)

    async def revoke_key(self, key_id: str) -> bool:
        with store_errors:
            key_hash = await self.client.get(self.keys.api_key_id(key_id))
            if key_hash is None:
                return False
            # HSETNX keeps the first revocation time: revoking twice changes nothing.
            await self.client.hsetnx(
                self.keys.api_key(text(key_hash)), "revoked_at", repr(time.time())
            )
        return True

    async def list_keys(self, tenant: str) -> list[ApiKeyRecord]:
        with store_errors:
            hashes = await self.client.zrange(self.keys.tenant_keys(tenant), 0, -1)
            if not hashes:
                return []
            async with self.client.pipeline(transaction=False) as pipe:
                for key_hash in hashes:
                    pipe.hmget(self.keys.api_key(text(key_hash)), KEY_FIELDS)
                rows = await pipe.execute()
        records = (key_record(fields) for fields in rows)
        return [r for r in records if r is not None and r.tenant == tenant]
