"""How durably each part of the store writes money now: the value health and metrics read.

A store that copies its writes to replicas before answering them (Redis on a cluster or behind
Sentinel, `wait_replicas`) says, per shard (a cluster master, or Sentinel's service), how many
replicas keep up with it. Fewer than it is configured to wait for is *reduced* durability: its
money writes are answered on the strength of the replicas it has, or of its own AOF when it has
none (docs/store.md, "Failover"). A store without replicas to wait for reports nothing.
"""

from __future__ import annotations

import msgspec

__all__ = ["ShardDurability"]


class ShardDurability(msgspec.Struct, kw_only=True, frozen=True):
    shard: str
    """A cluster master's `host:port`, Sentinel's service name, or the one server's address."""
    replicas: int | None
    """Replicas online and acknowledging within about a second; None: not known (the shard
    has not answered)."""
    wanted: int
    """The replicas a money write waits for when they are there (`wait_replicas`)."""
    aof: str
    """The shard's own fsync policy: `always`, `everysec`, `no`, `off` (no AOF) or `unknown`
    (CONFIG not allowed)."""

    @property
    def reduced(self) -> bool:
        """Fewer replicas keep up than a money write should wait for."""
        return self.replicas is not None and self.replicas < self.wanted
