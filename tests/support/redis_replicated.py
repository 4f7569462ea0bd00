"""A private primary and its replica (`redis-server` processes on free ports), for the tests of
what the store does when the replica stops acknowledging: `pause_replica()` (SIGSTOP) keeps its
connection open, so the primary still counts it and every `WAIT` times out, as during a replica
that hangs, lags or is being failed over."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import redis

from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_until

__all__ = ["ReplicatedRedis"]


class ReplicatedRedis:
    def __init__(self, binary: str, workdir: Path) -> None:
        self.primary = RedisServer(binary, workdir / "primary")
        self.replica = RedisServer(binary, workdir / "replica")

    @classmethod
    @contextlib.contextmanager
    def running(cls, binary: str, workdir: Path) -> Iterator[ReplicatedRedis]:
        pair = cls(binary, workdir)
        try:
            pair.start()
            yield pair
        finally:
            pair.replica.stop()
            pair.primary.stop()

    def start(self) -> None:
        for server in (self.primary, self.replica):
            server.workdir.mkdir(parents=True)
            server.start()
        with redis.Redis(port=self.replica.port) as client:
            client.replicaof("127.0.0.1", self.primary.port)
        wait_until(self.online, timeout=30, what="the replica")
        self._acknowledged()

    def url(self, *, wait_ms: int = 500) -> str:
        """The primary's store URL, money writes waiting for its one replica (`wait_ms`: long
        enough for a busy machine's replica to answer, short enough for a test to wait out)."""
        return f"{self.primary.url}?wait_replicas=1&wait_ms={wait_ms}"

    def online(self) -> bool:
        with redis.Redis(port=self.primary.port) as client:
            info = client.info("replication")
        return any(
            isinstance(v, dict) and v.get("state") == "online"
            for k, v in info.items()
            if k.startswith("slave")
        )

    def waits(self) -> int:
        """WAITs the primary has run."""
        with redis.Redis(port=self.primary.port) as client:
            stats = client.info("commandstats")
        return int(stats.get("cmdstat_wait", {}).get("calls", 0))

    def pause_replica(self) -> None:
        self.replica.pause()

    def resume_replica(self) -> None:
        """SIGCONT, then until the replica has caught up with everything the primary holds."""
        self.replica.resume()
        self._acknowledged()

    def _acknowledged(self) -> None:
        """Until the replica acknowledges a write made now (an online replica's first
        acknowledgement can take a while on a busy machine)."""
        with redis.Redis(port=self.primary.port) as client:
            client.set("replicated-pair:probe", "1")
            wait_until(lambda: client.wait(1, 100) >= 1, timeout=30, what="the replica's ack")
