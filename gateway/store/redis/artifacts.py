"""The Redis store's artifact area: stored media metadata (the bytes are in blob storage).

An artifact is one msgpack string; a zset orders them by expiry for the sweep, which deletes
the bytes and then the record. No TTL: a record that vanished by itself would leave its bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from redis.asyncio import Redis

from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys
from gateway.store.tasks import ArtifactRecord

__all__ = ["RedisArtifactArea"]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ArtifactRecord)


class RedisArtifactArea:
    """The artifact operations of `RedisStore` (a mixin: the store has the client)."""

    keys: RedisKeys

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis: ...

    async def create_artifact(self, record: ArtifactRecord) -> None:
        k = self.keys
        with store_errors:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.set(k.artifact(record.artifact_id), _encoder.encode(record))
                pipe.zadd(k.artifact_expiry(), {record.artifact_id: record.expires_at})
                await pipe.execute()

    async def get_artifact(self, tenant: str | None, artifact_id: str) -> ArtifactRecord | None:
        with store_errors:
            raw: Any = await self.client.get(self.keys.artifact(artifact_id))
        record = _decoder.decode(raw) if raw is not None else None
        return record if record is not None and tenant in (None, record.tenant) else None

    async def expired_artifacts(self, now: float, limit: int) -> list[ArtifactRecord]:
        k = self.keys
        with store_errors:
            ids: Any = await self.client.zrangebyscore(
                k.artifact_expiry(), "-inf", now, start=0, num=limit
            )
            if not ids:
                return []
            raws: Any = await self.client.mget([k.artifact(i.decode()) for i in ids])
        return [_decoder.decode(raw) for raw in raws if raw is not None]

    async def delete_artifact(self, artifact_id: str) -> None:
        k = self.keys
        with store_errors:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(k.artifact(artifact_id))
                pipe.zrem(k.artifact_expiry(), artifact_id)
                await pipe.execute()
