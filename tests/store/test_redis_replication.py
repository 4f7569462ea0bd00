"""What `INFO replication` and `CONFIG GET append*` say of a primary, as read by the replica
watch (`gateway/store/redis/replication.py`), on the text a Redis 7.0 primary answers."""

from __future__ import annotations

from redis.exceptions import ResponseError

from gateway.store.redis.replication import aof_policy, keeping_up

_INFO = (
    b"# Replication\r\nrole:master\r\nconnected_slaves:3\r\n"
    b"slave0:ip=10.0.0.2,port=7003,state=online,offset=1234,lag=0\r\n"
    b"slave1:ip=10.0.0.3,port=7004,state=online,offset=1000,lag=5\r\n"
    b"slave2:ip=10.0.0.4,port=7005,state=wait_bgsave,offset=0,lag=0\r\n"
    b"master_failover_state:no-failover\r\nmaster_repl_offset:1234\r\n"
)


def test_only_online_replicas_that_acknowledged_within_a_second_count() -> None:
    assert keeping_up(_INFO) == 1  # lagging 5 s (paused, cut off) and still syncing: out
    assert keeping_up(_INFO.replace(b"lag=5", b"lag=1")) == 2
    assert keeping_up(b"# Replication\r\nrole:master\r\nconnected_slaves:0\r\n") == 0
    # The primary's own lines (slave_read_repl_offset, ...) are no replicas.
    assert keeping_up(_INFO + b"slave_read_repl_offset:1\r\nslaves_online:9\r\n") == 1


def test_the_aof_policy_is_read_from_config_get() -> None:
    def reply(appendonly: bytes, fsync: bytes) -> list[bytes]:
        return [b"appendonly", appendonly, b"appendfsync", fsync, b"appendfilename", b"x.aof"]

    assert aof_policy(reply(b"yes", b"always")) == "always"
    assert aof_policy(reply(b"yes", b"everysec")) == "everysec"
    assert aof_policy(reply(b"no", b"always")) == "off"
    assert aof_policy(ResponseError("unknown command 'CONFIG'")) == "unknown"  # renamed away
    assert aof_policy([]) == "unknown"
