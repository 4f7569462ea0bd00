"""Store URLs: one server, a cluster, Sentinel; the store's own options; what is refused."""

from __future__ import annotations

import pytest

from gateway.store.factory import store_from_url
from gateway.store.redis import RedisStore
from gateway.store.redis.target import parse_target


def test_one_server_keeps_its_url_for_redis_py_without_the_stores_options() -> None:
    t = parse_target("redis://user:pw@cache:6380/3?shards=8&socket_keepalive=true")
    assert (t.topology, t.shards, t.wait_replicas, t.wait_ms) == ("server", 8, 0, 250)
    assert t.url == "redis://user:pw@cache:6380/3?socket_keepalive=true"


def test_a_cluster_from_several_nodes_waits_for_one_replica_by_default() -> None:
    t = parse_target("rediss+cluster://:secret@n1:7000,n2:7001?ssl_cert_reqs=none&wait_ms=100")
    assert (t.topology, t.tls, t.nodes) == ("cluster", True, (("n1", 7000), ("n2", 7001)))
    assert (t.password, t.username, t.wait_replicas, t.wait_ms) == ("secret", None, 1, 100)
    assert t.node_url(("n2", 7001)) == "rediss://:secret@n2:7001/0?ssl_cert_reqs=none"


def test_sentinel_names_its_service_and_database() -> None:
    t = parse_target("redis+sentinel://s1:26379,s2:26380/payments/2?wait_replicas=2")
    assert (t.topology, t.service, t.db, t.wait_replicas) == ("sentinel", "payments", 2, 2)
    assert t.nodes == (("s1", 26379), ("s2", 26380))


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis+sentinel://s1:26379", "SERVICE"),
        ("redis+cluster://n1:7000/1", "database 0"),
        ("redis+cluster://n1", "host:port"),
        ("redis+cluster://n1:7000?socket_timeout=1", "unknown store URL option"),
        ("redis://h:1?shards=0", "shards"),
        ("redis://h:1?wait_replicas=x", "wait_replicas"),
        ("redis+cluster://", "names no node"),
    ],
)
def test_what_cannot_be_used_is_refused_saying_why(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_target(url)


@pytest.mark.parametrize(
    "url",
    ["redis+cluster://127.0.0.1:7000", "redis+sentinel://127.0.0.1:26379/gw", "unix:///r.sock"],
)
def test_the_factory_takes_every_redis_form(url: str) -> None:
    store = store_from_url(url)
    assert isinstance(store, RedisStore) and store.url == url


def test_a_prefix_with_a_hash_tag_is_refused() -> None:
    with pytest.raises(ValueError, match="hash tags"):
        RedisStore("redis://h:1/0", prefix="gw{x}:")
