"""The Redis store's artifact area: stored media metadata (the bytes are in blob storage).

An artifact is one msgpack string, found by its id alone (a signed link names no tenant), in
one of `ARTIFACT_SHARDS` shards chosen by its id; each shard's zset orders its artifacts by
expiry for the sweep, which deletes the bytes and then the record. A record and its expiry
entry share the shard's hash slot, so each write is one MULTI. No TTL: a record that vanished
by itself would leave its bytes.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

import msgspec
from redis.asyncio import Redis, RedisCluster

from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import ARTIFACT_SHARDS, RedisKeys
from gateway.store.tasks import ArtifactRecord

__all__ = ["RedisArtifactArea"]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ArtifactRecord)


class RedisArtifactArea:
    """The artifact operations of `RedisStore` (a mixin: the store has the client)."""

    keys: RedisKeys

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis | RedisCluster: ...

    async def create_artifact(self, record: ArtifactRecord) -> None:
        k = self.keys
        with store_errors:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.set(k.artifact(record.artifact_id), _encoder.encode(record))
                pipe.zadd(
                    k.artifact_expiry_of(record.artifact_id),
                    {record.artifact_id: record.expires_at},
                )
                await pipe.execute()

    async def get_artifact(self, tenant: str | None, artifact_id: str) -> ArtifactRecord | None:
        with store_errors:
            raw: Any = await self.client.get(self.keys.artifact(artifact_id))
        record = _decoder.decode(raw) if raw is not None else None
        return record if record is not None and tenant in (None, record.tenant) else None

    async def expired_artifacts(self, now: float, limit: int) -> list[ArtifactRecord]:
        """The `limit` soonest expired of every shard's first `limit`: one zset read per
        shard, then the records of those."""
        k = self.keys
        with store_errors:
            async with self.client.pipeline(transaction=False) as pipe:
                for shard in range(ARTIFACT_SHARDS):
                    pipe.zrangebyscore(
                        k.artifact_expiry(shard), "-inf", now, start=0, num=limit, withscores=True
                    )
                shards: list[Any] = await pipe.execute()
            due = heapq.nsmallest(limit, (e for found in shards for e in found), key=lambda e: e[1])
            if not due:
                return []
            async with self.client.pipeline(transaction=False) as pipe:
                for artifact_id, _ in due:
                    pipe.get(k.artifact(artifact_id.decode()))
                raws: list[Any] = await pipe.execute()
        return [_decoder.decode(raw) for raw in raws if raw is not None]

    async def delete_artifact(self, artifact_id: str) -> None:
        k = self.keys
        with store_errors:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(k.artifact(artifact_id))
                pipe.zrem(k.artifact_expiry_of(artifact_id), artifact_id)
                await pipe.execute()
