"""The Redis store's area of stored Responses API responses (`gateway.store.responses`).

A response is one msgpack string under its tenant's hash tag (`keys.RedisKeys.response`),
expiring by itself at its `expires_at` (PXAT): no sweep, no index. Each operation is one
command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from redis.asyncio import Redis, RedisCluster

from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys
from gateway.store.responses import ItemOrder, ItemsPage, StoredResponse, page_items

__all__ = ["RedisResponseArea"]

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(StoredResponse).decode


class RedisResponseArea:
    """The stored-response operations of `RedisStore` (a mixin: the store has the client)."""

    keys: RedisKeys

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis | RedisCluster: ...

    async def put_response(self, record: StoredResponse) -> None:
        key = self.keys.response(record.tenant, record.response_id)
        with store_errors:
            await self.client.set(key, _encode(record), pxat=int(record.expires_at * 1000))

    async def get_response(self, tenant: str, response_id: str) -> StoredResponse | None:
        with store_errors:
            raw: Any = await self.client.get(self.keys.response(tenant, response_id))
        return None if raw is None else _decode(raw)

    async def delete_response(self, tenant: str, response_id: str) -> bool:
        with store_errors:
            deleted: Any = await self.client.delete(self.keys.response(tenant, response_id))
        return bool(deleted)

    async def response_input_items(
        self,
        tenant: str,
        response_id: str,
        *,
        limit: int,
        after: str | None = None,
        order: ItemOrder = "desc",
    ) -> ItemsPage | None:
        record = await self.get_response(tenant, response_id)
        if record is None:
            return None
        return page_items(record.input_items, limit=limit, after=after, order=order)
