"""A primary, a replica and three sentinels watching them, on free ports, for the Sentinel tests.

The sentinels agree (quorum 2) that the primary is down 1 s after it stops answering and
promote the replica; `url` is the store URL naming the sentinels and the service. A killed
primary started again is turned into a replica of the new one by the sentinels.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import redis

from tests.support.ports import free_port
from tests.support.redis_server import RedisServer, answers_ping
from tests.support.waiting import answers_or_exits, wait_until

__all__ = ["SERVICE", "LocalSentinel"]

SERVICE = "gw"


DOWN_AFTER_MS = 3000
"""How long a primary may not answer before the sentinels fail it over. It was 1 s: with the
suite keeping both cores busy, a test's store then once found an empty wallet right after a
failover (2026-11-27), most likely a second failover, of a new primary starved that long, to
the restarted old one still loading its first sync. The sentinels' logs are kept beside them
(`sentinel-<port>.log`) to tell."""


class LocalSentinel:
    def __init__(self, binary: str, workdir: Path, *, durable: bool = False) -> None:
        self.binary, self.workdir = binary, workdir
        self.primary = RedisServer(binary, workdir / "primary", durable=durable)
        self.replica = RedisServer(binary, workdir / "replica", durable=durable)
        self.sentinel_ports = [free_port() for _ in range(3)]
        self._sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        nodes = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{nodes}/{SERVICE}"

    @classmethod
    @contextlib.contextmanager
    def running(
        cls, binary: str, workdir: Path, *, durable: bool = False
    ) -> Iterator[LocalSentinel]:
        """Started; stopped when the block ends. `durable`: the data nodes write every write
        to their append-only file before answering it (`appendfsync always`)."""
        setup = cls(binary, workdir, durable=durable)
        try:
            setup.start()
            yield setup
        finally:
            setup.stop()

    def start(self) -> None:
        for server in (self.primary, self.replica):
            server.workdir.mkdir(parents=True)
        self.primary.start()
        self.replica.start()
        with redis.Redis(port=self.replica.port) as client:
            client.replicaof("127.0.0.1", self.primary.port)
        wait_until(lambda: self._online(self.primary.port), timeout=30, what="the replica")
        for port in self.sentinel_ports:
            conf = self.workdir / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.workdir}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"logfile {self.workdir / f'sentinel-{port}.log'}\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} 5000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            process = subprocess.Popen(
                [self.binary, str(conf), "--sentinel"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self._sentinels.append(process)
            if not answers_or_exits(process, lambda port=port: answers_ping(port), 10.0):
                raise RuntimeError(f"redis-sentinel did not answer on port {port}")
        wait_until(self._agreed, timeout=30, what="the sentinels to see each other")

    def _online(self, primary_port: int) -> bool:
        with redis.Redis(port=primary_port) as client:
            info = client.info("replication")
        return any(
            isinstance(v, dict) and v.get("state") == "online"
            for k, v in info.items()
            if k.startswith("slave")
        )

    def _agreed(self) -> bool:
        for port in self.sentinel_ports:
            with redis.Redis(port=port) as client:
                state = client.sentinel_master(SERVICE)
            if int(state.get("num-other-sentinels", 0)) < 2 or int(state.get("num-slaves", 0)) < 1:
                return False
        return True

    def primary_port(self) -> int:
        """The port of the primary the sentinels name now."""
        with redis.Redis(port=self.sentinel_ports[0]) as client:
            _, port = client.sentinel_get_master_addr_by_name(SERVICE)
        return int(port)

    def replicated(self) -> bool:
        """The current primary has its replica online (so money writes can be acknowledged)."""
        try:
            return self._online(self.primary_port())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        for process in self._sentinels:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._sentinels = []
        self.replica.stop()
        self.primary.stop()
