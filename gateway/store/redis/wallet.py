"""The Redis store's wallet area: grants, the balance with its active holds, and the ledger
(`grant.lua`, `wallet.lua`, `ledger.lua`, `ledger_range.lua`, each one script on the tenant's
keys). A grant moves money: it goes through the pipelined client, durable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.store.base import LedgerEntry, LedgerKind, LedgerPage, Wallet
from gateway.store.redis.codec import decode_entry
from gateway.store.redis.errors import store_errors
from gateway.store.redis.keys import RedisKeys

if TYPE_CHECKING:
    from redis.asyncio import Redis, RedisCluster
    from redis.commands.core import AsyncScript

    from gateway.store.redis.scripts import Scripts

__all__ = ["RedisWalletArea"]


class RedisWalletArea:
    """The wallet operations of `RedisStore` (a mixin: the store has the scripts)."""

    keys: RedisKeys

    if TYPE_CHECKING:

        @property
        def client(self) -> Redis | RedisCluster: ...
        @property
        def _s(self) -> Scripts: ...
        async def _eval(
            self, script: AsyncScript, keys: Sequence[str], args: Sequence[Any]
        ) -> Any: ...
        async def _eval_hot(
            self, name: str, keys: Sequence[str], args: Sequence[Any], *, durable: bool = False
        ) -> Any: ...

    async def grant(
        self,
        tenant: str,
        amount_units: int,
        *,
        entry_id: str,
        reason: str,
        kind: LedgerKind = "grant",
    ) -> LedgerEntry:
        packed = await self._eval_hot(
            "grant",
            self.keys.money(tenant),
            (entry_id, tenant, kind, amount_units, reason),
            durable=True,
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

    async def ledger_entry(self, tenant: str, entry_id: str) -> LedgerEntry | None:
        with store_errors:
            packed: Any = await self.client.hget(self.keys.ledger(tenant), entry_id)
        return decode_entry(packed) if packed is not None else None

    async def ledger_range(
        self, tenant: str, *, since: float, until: float, limit: int, after: str | None = None
    ) -> LedgerPage:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        k = self.keys
        res = await self._eval(
            self._s.ledger_range,
            (k.ledger(tenant), k.ledger_order(tenant)),
            (repr(since), repr(until), limit, after or ""),
        )
        entries = [decode_entry(packed) for packed in res[1:]]
        return LedgerPage(entries=entries, has_more=res[0] == 1)
