"""A private Redis Cluster (3 masters, a replica each) that tests start, fail over and stop.

Every node is a `redis-server --cluster-enabled yes` on ports of this process's slice
(tests/support/ports.py: its data port and its cluster bus port both), so several pytest-xdist
workers each start one at once without meeting; `redis-cli --cluster create ...
--cluster-replicas 1 --cluster-yes` joins them. `start()` returns once every node says the
cluster is ok and every master has its replica online (so `WAIT 1` is answered).

`redis_cluster` is the session's shared cluster (its tests keep to key prefixes of their own;
import the fixture where it is used); tests that kill or fail over a node make a cluster of
their own with `LocalCluster.running`.
Without redis-server or redis-cli the fixture skips locally and fails on CI (`CI=true`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.ports import free_port
from tests.support.redis_server import answers_ping
from tests.support.waiting import answers_or_exits, wait_until

__all__ = ["ClusterNode", "LocalCluster", "redis_cluster", "redis_cluster_url"]


@dataclass
class ClusterNode:
    port: int
    bus_port: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2)

    def info(self, section: str) -> dict[str, Any]:
        with self.client() as client:
            found: dict[str, Any] = client.info(section)
        return found


class LocalCluster:
    """`masters` masters with `replicas` replicas each, on free ports (see the module)."""

    def __init__(
        self,
        binary: str,
        cli: str,
        workdir: Path,
        *,
        masters: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = 1000,
        durable: bool = False,
        full_coverage: bool = True,
    ) -> None:
        self.binary, self.cli, self.workdir = binary, cli, workdir
        self.masters_count, self.replicas = masters, replicas
        self.node_timeout_ms = node_timeout_ms
        self.durable = durable
        self.full_coverage = full_coverage
        """`cluster-require-full-coverage`: Redis's default (yes) stops every master while one
        slot is unserved; `no` keeps the others serving (docs/deploy.md)."""
        self.url_options = ""
        """Store URL options (`?wait_ms=...`) that `url` carries."""
        self.nodes = [
            ClusterNode(free_port(), free_port(), workdir / f"node{i}")
            for i in range(masters * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        return f"redis+cluster://{self.nodes[0].address}{self.url_options}"

    @classmethod
    @contextlib.contextmanager
    def running(
        cls,
        binary: str,
        cli: str,
        workdir: Path,
        *,
        node_timeout_ms: int = 1000,
        durable: bool = False,
        full_coverage: bool = True,
    ) -> Iterator[LocalCluster]:
        """A cluster of its own (for a test that kills nodes), stopped when the block ends."""
        cluster = cls(
            binary,
            cli,
            workdir,
            node_timeout_ms=node_timeout_ms,
            durable=durable,
            full_coverage=full_coverage,
        )
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        for node in self.nodes:
            node.workdir.mkdir(parents=True, exist_ok=True)
            self._launch(node)
        create = [self.cli, "--cluster", "create", *(n.address for n in self.nodes)]
        create += ["--cluster-replicas", str(self.replicas), "--cluster-yes"]
        done = subprocess.run(create, capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout[-500:]!r}")
        self.wait_healthy()

    def _launch(self, node: ClusterNode) -> None:
        args = [self.binary, "--port", str(node.port), "--bind", "127.0.0.1"]
        args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        args += ["--cluster-port", str(node.bus_port)]
        args += ["--cluster-node-timeout", str(self.node_timeout_ms)]
        args += ["--cluster-replica-validity-factor", "0"]  # any replica may take over
        args += ["--cluster-require-full-coverage", "yes" if self.full_coverage else "no"]
        args += ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]
        args += ["--dir", str(node.workdir), "--save", ""]
        if self.durable:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        node.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not answers_or_exits(node.process, lambda: answers_ping(node.port), 10.0):
            raise RuntimeError(f"redis-server did not answer on port {node.port}")

    def live_nodes(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.process is not None and n.process.poll() is None]

    def masters(self) -> list[ClusterNode]:
        return [n for n in self.live_nodes() if n.info("replication").get("role") == "master"]

    def healthy(self) -> bool:
        """Every live node says ok, and every master has its replicas online."""
        try:
            for node in self.live_nodes():
                with node.client() as client:
                    state = client.execute_command("CLUSTER", "INFO")
                if b"cluster_state:ok" not in state:
                    return False
            masters = self.masters()
            if len(masters) != self.masters_count:
                return False
            return all(_online_replicas(m) >= self.replicas for m in masters)
        except redis.RedisError:
            return False

    def wait_healthy(self, timeout: float = 60.0) -> None:
        wait_until(self.healthy, timeout=timeout, interval=0.1, what="the cluster to be ok")

    def master_of(self, key: str) -> ClusterNode:
        """The node that serves `key`'s slot now (as the first live node sees it)."""
        with self.live_nodes()[0].client() as client:
            slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
            ranges = client.execute_command("CLUSTER", "SLOTS")
        for first, last, master, *_ in ranges:
            if first <= slot <= last:
                return next(n for n in self.nodes if n.port == int(master[1]))
        raise AssertionError(f"no master serves slot {slot}")

    def replica_of(self, master: ClusterNode) -> ClusterNode:
        with master.client() as client:
            master_id = client.execute_command("CLUSTER", "MYID").decode()
        for node in self.live_nodes():
            if node is master:
                continue
            with node.client() as client:
                nodes = client.execute_command("CLUSTER", "NODES").decode()
            mine = next(line for line in nodes.splitlines() if "myself" in line)
            if mine.split()[3] == master_id:
                return node
        raise AssertionError(f"no replica of {master.address}")

    def kill(self, node: ClusterNode) -> None:
        """`kill -9`."""
        assert node.process is not None
        node.process.kill()
        node.process.wait(timeout=10)

    def pause(self, node: ClusterNode) -> None:
        """SIGSTOP: its connections stay open and nothing is answered (a stalled node)."""
        assert node.process is not None
        os.kill(node.process.pid, signal.SIGSTOP)

    def resume(self, node: ClusterNode) -> None:
        assert node.process is not None
        os.kill(node.process.pid, signal.SIGCONT)

    def role(self, node: ClusterNode) -> str:
        """`master` or `slave`, as the node says of itself ("" when it does not answer)."""
        try:
            return str(node.info("replication").get("role", ""))
        except redis.RedisError:
            return ""

    def restart(self, node: ClusterNode) -> None:
        """Start a killed node again on its ports and folder: it rejoins (as a replica when
        another took over its slots)."""
        self._launch(node)

    def flushall(self) -> None:
        for node in self.masters():
            with node.client() as client:
                client.flushall()

    def stop(self) -> None:
        for node in self.nodes:
            proc, node.process = node.process, None
            if proc is None or proc.poll() is not None:
                continue
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _online_replicas(master: ClusterNode) -> int:
    replication = master.info("replication")
    return sum(
        isinstance(v, dict) and v.get("state") == "online"
        for k, v in replication.items()
        if k.startswith("slave")
    )


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Redis Cluster is required on CI: {reason}")
    pytest.skip(f"no Redis Cluster: {reason}")


def cluster_binaries() -> tuple[str, str]:
    """redis-server and redis-cli; skips locally and fails on CI when one is missing."""
    binary, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if binary is None or cli is None:
        _unavailable("redis-server and redis-cli are needed")
        raise AssertionError("unreachable")
    return binary, cli


_shared: list[LocalCluster] = []
_users = [0]


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster for the session (per xdist worker): 3 masters, 3 replicas. Conftests and
    modules that import this fixture share the one cluster (counted, stopped by the last)."""
    if not _shared:
        binary, cli = cluster_binaries()
        # Nothing kills a node of this one (those tests make their own): Redis's default node
        # timeout, so that its nodes ping each other about 20 times less than at 1 s.
        cluster = LocalCluster(
            binary, cli, tmp_path_factory.mktemp("redis-cluster"), node_timeout_ms=15_000
        )
        # Money writes wait for a replica (`WAIT`) up to 250 ms by default. The whole suite
        # keeps both cores busy, and a replica starved that long made a contract test's grant
        # an unknown outcome (seen once in a CI run): these tests check what the store does,
        # not how fast a starved replica answers, so they allow it 2 s. The failover tests
        # keep the default on clusters of their own.
        cluster.url_options = "?wait_ms=2000"
        try:
            cluster.start()
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            _unavailable(f"could not start the cluster: {exc}")
        _shared.append(cluster)
    _users[0] += 1
    try:
        yield _shared[0]
    finally:
        _users[0] -= 1
        if _users[0] == 0:
            _shared.pop().stop()


@pytest.fixture(scope="session")
def redis_cluster_url(redis_cluster: LocalCluster) -> str:
    return redis_cluster.url
