"""Where the Redis store lives: one server, a Redis Cluster, or a primary behind Sentinel.

    redis://[user:password@]host:port[/db][?options]      one server (rediss:// TLS; unix://)
    redis+cluster://[user:password@]host:port[,host:port...][?options]
                                                           a Redis Cluster, from any node(s)
    redis+sentinel://[user:password@]host:port[,host:port...]/SERVICE[/db][?options]
                                                           the primary of SERVICE, as the
                                                           sentinels (host:port...) say

`rediss+cluster://` and `rediss+sentinel://` speak TLS to the data nodes (redis-py's `ssl_*`
options). The credentials are the data nodes'; the sentinels are asked without them.

The store's own options, in every form:

- `shards=N`: task queue shards (16; every process of a deployment must use the same);
- `wait_replicas=N`, `wait_ms=MS`: a write that moves money is answered once the replicas its
  primary has, at most N, have it (none: on the primary's AOF), waiting at most MS
  (docs/store.md, "Failover"); N is 0 on one server, 1 on a cluster and behind Sentinel; MS
  is 250.

Other options of a one-server URL go to redis-py as before; on a cluster or Sentinel only the
`ssl_*` ones are known, and anything else is an error rather than ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode

from gateway.store.redis.keys import DEFAULT_SHARDS
from gateway.store.redis.pipeline import Address

__all__ = ["SCHEMES", "RedisTarget", "parse_target"]

Topology = Literal["server", "cluster", "sentinel"]

SCHEMES: dict[str, tuple[Topology, bool]] = {
    "redis": ("server", False),
    "rediss": ("server", True),
    "unix": ("server", False),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
}
_OWN = ("shards", "wait_replicas", "wait_ms")
_TLS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")
_WAIT_MS = 250


@dataclass(frozen=True, slots=True)
class RedisTarget:
    topology: Topology
    url: str
    """One server: its URL for redis-py and the pipeline (the store's options taken out).
    Otherwise the first node's, which `node_url` rewrites for each node."""
    nodes: tuple[Address, ...] = ()
    """The cluster's startup nodes, or the sentinels."""
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False
    tls_options: dict[str, str] = field(default_factory=dict)
    shards: int = DEFAULT_SHARDS
    wait_replicas: int = 0
    wait_ms: int = _WAIT_MS

    def node_url(self, address: Address) -> str:
        """A redis(s):// URL of one data node, with the credentials, database and TLS options."""
        auth = ""
        if self.password is not None:
            user = quote(self.username or "", safe="")
            auth = f"{user}:{quote(self.password, safe='')}@"
        query = f"?{urlencode(self.tls_options)}" if self.tls_options else ""
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{auth}{address[0]}:{address[1]}/{self.db}{query}"


def _number(options: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = options.pop(name, None)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ValueError(f"store URL option {name} must be a whole number from {low} to {high}")
    return value


def _address(text: str) -> Address:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"store URL node {text!r} is not host:port")
    return host.strip("[]"), int(port)


def parse_target(url: str) -> RedisTarget:
    """The target a store URL names; ValueError (saying what is wrong) for one it cannot use."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise ValueError(f"not a Redis store URL: {url!r}")
    topology, tls = SCHEMES[scheme]
    rest, _, query = rest.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True))
    shards = _number(options, "shards", DEFAULT_SHARDS, 1, 1024)
    replicas = _number(options, "wait_replicas", 0 if topology == "server" else 1, 0, 16)
    wait_ms = _number(options, "wait_ms", _WAIT_MS, 1, 60_000)
    if topology == "server":
        plain = f"{scheme}://{rest}" + (f"?{urlencode(options)}" if options else "")
        return RedisTarget(
            topology, plain, shards=shards, wait_replicas=replicas, wait_ms=wait_ms, tls=tls
        )
    unknown = sorted(set(options) - set(_TLS))
    if unknown:
        raise ValueError(f"unknown store URL option(s) for {scheme}://: {', '.join(unknown)}")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username, password = (unquote(user) or None), (unquote(secret) if colon else None)
    nodes = tuple(_address(h) for h in hosts.split(",") if h)
    if not nodes:
        raise ValueError(f"store URL names no node: {url!r}")
    parts = [unquote(p) for p in path.split("/") if p]
    service, db = "", 0
    if topology == "sentinel":
        if not parts:
            raise ValueError("a redis+sentinel:// URL needs the service: .../SERVICE[/db]")
        service, parts = parts[0], parts[1:]
    if parts:
        if topology == "cluster" or len(parts) > 1 or not parts[0].isdigit():
            raise ValueError(f"unexpected path in store URL: {url!r} (a cluster has database 0)")
        db = int(parts[0])
    target = RedisTarget(
        topology,
        "",
        nodes=nodes,
        service=service,
        db=db,
        username=username,
        password=password,
        tls=tls,
        tls_options=options,
        shards=shards,
        wait_replicas=replicas,
        wait_ms=wait_ms,
    )
    return replace(target, url=target.node_url(nodes[0]))
