"""Every Redis key the Redis store uses, in one place (ledger and hold ids: `ledger_ids.py`).

All keys start with the store's prefix (default ``gw:``) so one Redis can serve several
gateways or test runs. The layout is the same on one Redis, behind Sentinel and on a Redis
Cluster: every atomic step (one Lua script) touches the keys of one hash slot only, so the
keys a step shares carry one hash tag (the part in braces, which alone decides the slot):

- ``{t:<tenant>}``: everything of one tenant: wallet, ledger, holds, rate buckets of its API
  keys, idempotency records, call markers, tasks, their listing indexes, fences and the sets
  the sweeps read. A call or a task operation names its tenant, so its keys are built here
  and passed to its script; no script builds a key name.
- ``{q<n>.<k>.<j>}``: task-queue shard ``k`` of ``n`` (the store's `shards`): the Stream the
  workers read, the queue entry of each task in it, and the registry of the tenants whose
  tasks go to it. A tenant's tasks go to shard ``crc32(tenant) % n``. ``j`` is the first
  number that puts shard ``k`` in the ``k``-th of ``n`` equal slot ranges, so the shards of a
  cluster whose slots are split evenly spread evenly over its masters.
- ``{a<k>.<j>}``: artifact shard ``k`` of `ARTIFACT_SHARDS` (by the artifact id), a record
  and its place in the shard's expiry zset, so an artifact is found by its id alone.
- ``{<key tag>}``: an API key's record and its tenant's id index, under the slot tag its
  secret carries (`gateway.store.key_tags`: a short tag in the same slot as ``{t:<tenant>}``),
  so a key is found from the secret alone, in its tenant's slot.

Tenant scope (``{p}{t:<tenant>}:`` then):

    wallet                      hash    balance, seq (the ledger's sequence)
    ledger                      hash    entry id -> msgpack entry
    ledger_order                zset    entry id by seq (newest-first paging)
    holds                       hash    hold:{call_id|task_id} -> units; total  TTL: last hold's
    hold_expiry                 zset    hold id by expiry time             TTL: last hold's
    rate:{api_key_id}           hash    r, rt, t, tt (levels, times)       TTL: until both full
    idem:{scope}                hash    fp, call, reply? (a call) or fp, task (a task create)
                                                                           TTL: lease, then reply
    done:{call_id}              string  settled-or-released marker         TTL: 1 day
    keys                        zset    API key hash by created_at (list_keys)
    task:{task_id}              hash    the task's fields (redis/tasks.py); unconfirmed, idem
                                        until confirmed; shard once queued
    task_fence:{task_id}        string  an abandoned create (a late one takes nothing)  TTL: 1 day
    task_seq                    string  the tenant's last task sequence number
    tasks                       zset    task_id by the tenant's creation sequence (listing)
    task_index:{status}:{capability}
                                zset    task_id by seq, in that status and/or of that
                                        capability ("" = any; filtered listing)
    tasks_unconfirmed           zset    task_id by creation time, until confirmed or abandoned
    tasks_open                  zset    task_id (queued or running) by the time the queue's
                                        reconcile should next check it has a queue entry
    task_expiry                 zset    msgpack [task_id, tenant, capability, status] by the time
                                        an ended task expires (the retention sweep)
    response:{response_id}      string  a stored Responses API response (msgpack
                                        StoredResponse, redis/responses.py)  TTL: its retention
    callbacks_due               zset    task_id by when its callback's next attempt is due (or
                                        its attempt's lease ends); the delivery schedule
    callbacks_failed            zset    task_id by when its callback failed or was disabled
    callback_secret             hash    secret, created_at, previous?, previous_until?

Queue shard scope (``{p}{q<n>.<k>.<j>}:`` then):

    queue                       stream  one entry (task, tenant, capability) per queued task;
                                        consumer group "workers"
    entries                     hash    task_id -> its entry id (makes enqueueing idempotent)
    tenants                     zset    the tenants whose tasks go here (score 0, by name): what
                                        the sweeps and the reconcile walk
    reconcile                   string  who reconciles this shard now                TTL: a pass

Artifact shard scope (``{p}{a<k>.<j>}:`` then): ``artifact:{id}`` (msgpack ArtifactRecord) and
``artifact_expiry`` (zset, artifact_id by expires_at).

Key tag scope (``{p}{<key tag>}:`` then, in the tenant's slot): ``apikey:{key_hash}`` (hash:
key_id, tenant, created_at, prefix, revoked_at?, settings? (msgpack KeySettings),
valid_until? (an old secret in its grace; the hash expires a day after)) and ``apikey_ids``
(hash: key_id -> its secret's hash, ``<key_id>:prev`` -> the previous secret's). The tenant's
wallet hash also keeps each key's spend (``s:<key_id>:<period>`` units and
``S:<key_id>:<period>`` the period's first day) and last use (``u:<key_id>``); its holds hash
the key of each hold (``k:<hold id>``) and each key's held units (``kt:<key_id>``).

Unscoped: ``{p}apikey_id:{key_id}`` (string: the key's tag; a 64-character hash for a key of
the previous layout), ``{p}apikey_tag:{key_hash}`` (string: the tag of a key issued without
one in its secret), ``{p}task_index_version`` (string); ``{p}apikey:{key_hash}`` is the
previous layout's record, moved to its tag's slot when first read.

A task that ended expires `task_retention_days` later (its hash's TTL; the sweep removes its
index entries); artifacts have no TTL (the sweep deletes them). `gateway store migrate`
(`migrate.py`) moves a store written in the previous layout (`LegacyKeys`: one Redis, global
queue and sweep keys, ``wallet:{tenant}``-style names) to this one.
"""

from __future__ import annotations

import zlib
from functools import cache

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

__all__ = [
    "ARTIFACT_SHARDS",
    "DEFAULT_SHARDS",
    "STATUSES",
    "TASK_GROUP",
    "LegacyKeys",
    "RedisKeys",
    "shard_tag",
]

TASK_GROUP = "workers"
"""The consumer group of every task queue stream (each worker is a consumer, by its id)."""

DEFAULT_SHARDS = 16
"""Task queue shards unless the store URL says otherwise (`?shards=N`)."""

ARTIFACT_SHARDS = 16
"""Artifact shards: part of the layout (an artifact's key follows from its id), not a setting."""

STATUSES = ("queued", "running", "succeeded", "failed", "canceled")
"""Task statuses in the order of `RedisKeys.task_index_block` (task_common.lua's STATUS_AT)."""


@cache
def shard_tag(kind: str, index: int, count: int) -> str:
    """The hash tag of shard `index` of `count`: ``<kind><index>.<j>`` for the first j whose
    slot is in the index-th of `count` equal slot ranges (even spread over even masters)."""
    low = index * REDIS_CLUSTER_HASH_SLOTS // count
    high = (index + 1) * REDIS_CLUSTER_HASH_SLOTS // count
    j = 0
    while True:
        tag = f"{kind}{index}.{j}"
        if low <= key_slot(tag.encode()) < high:
            return tag
        j += 1


def _shard(name: str, count: int) -> int:
    return zlib.crc32(name.encode()) % count


class RedisKeys:
    """Builds the store's keys under one prefix, for `shards` task-queue shards."""

    __slots__ = ("_queue_kind", "prefix", "shards")

    def __init__(self, prefix: str = "gw:", shards: int = DEFAULT_SHARDS) -> None:
        if "{" in prefix or "}" in prefix:
            raise ValueError("a Redis key prefix must not contain '{' or '}' (hash tags)")
        if not 1 <= shards <= 1024:
            raise ValueError(f"shards must be from 1 to 1024 (got {shards})")
        self.prefix = prefix
        self.shards = shards
        self._queue_kind = f"q{shards}."

    # Unscoped ---------------------------------------------------------------------------

    def legacy_api_key(self, key_hash: str) -> str:
        return f"{self.prefix}apikey:{key_hash}"

    def api_key_id(self, key_id: str) -> str:
        return f"{self.prefix}apikey_id:{key_id}"

    def api_key_tag(self, key_hash: str) -> str:
        return f"{self.prefix}apikey_tag:{key_hash}"

    # An API key's keys: its tenant's slot, under the key's tag -----------------------------

    def api_key(self, tag: str, key_hash: str) -> str:
        return f"{self.prefix}{{{tag}}}:apikey:{key_hash}"

    def api_key_index(self, tag: str) -> str:
        return f"{self.prefix}{{{tag}}}:apikey_ids"

    def task_index_version(self) -> str:
        return f"{self.prefix}task_index_version"

    def pattern(self) -> str:
        """A SCAN pattern matching every key of this prefix (tests, maintenance)."""
        return f"{_glob_escape(self.prefix)}*"

    # A tenant's keys: one hash slot --------------------------------------------------------

    def tenant_scope(self, tenant: str) -> str:
        """What every key of `tenant` starts with (its hash tag included)."""
        return f"{self.prefix}{{t:{tenant}}}:"

    def wallet(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}wallet"

    def ledger(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}ledger"

    def ledger_order(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}ledger_order"

    def money(self, tenant: str) -> tuple[str, str, str]:
        """wallet, ledger, ledger_order: what a script that appends an entry takes."""
        scope = self.tenant_scope(tenant)
        return f"{scope}wallet", f"{scope}ledger", f"{scope}ledger_order"

    def holds(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}holds"

    def hold_expiry(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}hold_expiry"

    def rate(self, tenant: str, api_key_id: str) -> str:
        return f"{self.tenant_scope(tenant)}rate:{api_key_id}"

    def idempotency(self, tenant: str, scope: str) -> str:
        return f"{self.tenant_scope(tenant)}idem:{scope}"

    def done(self, tenant: str, call_id: str) -> str:
        return f"{self.tenant_scope(tenant)}done:{call_id}"

    def tenant_keys(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}keys"

    def task(self, tenant: str, task_id: str) -> str:
        return f"{self.tenant_scope(tenant)}task:{task_id}"

    def task_fence(self, tenant: str, task_id: str) -> str:
        return f"{self.tenant_scope(tenant)}task_fence:{task_id}"

    def task_seq(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}task_seq"

    def tenant_tasks(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}tasks"

    def task_index(self, tenant: str, status: str = "", capability: str = "") -> str:
        """The tenant's tasks in `status` and/or of `capability` ("" = any, not both)."""
        return f"{self.tenant_scope(tenant)}task_index:{status}:{capability}"

    def task_indexes(self, tenant: str, status: str, capability: str) -> tuple[str, str, str]:
        """The index zsets a task is in: by status, by capability, by both."""
        return (
            self.task_index(tenant, status),
            self.task_index(tenant, capability=capability),
            self.task_index(tenant, status, capability),
        )

    def task_index_block(self, tenant: str, capability: str) -> tuple[str, ...]:
        """The 11 index zsets a task of `capability` can be in, as task_common.lua's
        `use_indexes` reads them: by status (in `STATUSES` order), by status and capability
        (same order), by capability."""
        return (
            *(self.task_index(tenant, s) for s in STATUSES),
            *(self.task_index(tenant, s, capability) for s in STATUSES),
            self.task_index(tenant, capability=capability),
        )

    def task_lists_and_money(self, tenant: str, task_id: str, capability: str) -> tuple[str, ...]:
        """The KEYS of a step that moves a task between its tenant's lists and holds, charges
        or refunds it (`task_confirm.lua`, `task_cancel.lua`), in their order: the task, holds,
        hold expiry, unconfirmed, tasks, open, expiry, the money keys, the index block."""
        return (
            self.task(tenant, task_id),
            self.holds(tenant),
            self.hold_expiry(tenant),
            self.tasks_unconfirmed(tenant),
            self.tenant_tasks(tenant),
            self.tasks_open(tenant),
            self.task_expiry(tenant),
            *self.money(tenant),
            *self.task_index_block(tenant, capability),
        )

    def tasks_unconfirmed(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}tasks_unconfirmed"

    def tasks_open(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}tasks_open"

    def task_expiry(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}task_expiry"

    def response(self, tenant: str, response_id: str) -> str:
        return f"{self.tenant_scope(tenant)}response:{response_id}"

    def callbacks_due(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}callbacks_due"

    def callbacks_failed(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}callbacks_failed"

    def callback_secret(self, tenant: str) -> str:
        return f"{self.tenant_scope(tenant)}callback_secret"

    def task_pattern(self) -> str:
        """A SCAN pattern of every `task(tenant, id)` (the prefix's glob characters escaped)."""
        return f"{_glob_escape(self.prefix)}{{t:*}}:task:*"

    def task_id_of(self, key: str) -> tuple[str, str]:
        """(tenant, task_id) of a key `task(tenant, task_id)` made."""
        rest = key[len(self.prefix) + len("{t:") :]
        tenant, _, task_id = rest.rpartition("}:task:")
        return tenant, task_id

    # Task queue shards -------------------------------------------------------------------

    def shard_of(self, tenant: str) -> int:
        """The queue shard of `tenant`'s tasks."""
        return _shard(tenant, self.shards)

    def shard_scope(self, shard: int) -> str:
        return f"{self.prefix}{{{shard_tag(self._queue_kind, shard, self.shards)}}}:"

    def task_queue(self, shard: int) -> str:
        return f"{self.shard_scope(shard)}queue"

    def task_entries(self, shard: int) -> str:
        return f"{self.shard_scope(shard)}entries"

    def shard_tenants(self, shard: int) -> str:
        return f"{self.shard_scope(shard)}tenants"

    def reconcile_lock(self, shard: int) -> str:
        return f"{self.shard_scope(shard)}reconcile"

    def shard_pattern(self) -> str:
        """A SCAN pattern of every queue shard's keys, whatever its shard count."""
        return f"{_glob_escape(self.prefix)}{{q*}}:*"

    # Artifacts ---------------------------------------------------------------------------

    def artifact_shard(self, artifact_id: str) -> int:
        return _shard(artifact_id, ARTIFACT_SHARDS)

    def _artifact_scope(self, shard: int) -> str:
        return f"{self.prefix}{{{shard_tag('a', shard, ARTIFACT_SHARDS)}}}:"

    def artifact(self, artifact_id: str) -> str:
        scope = self._artifact_scope(self.artifact_shard(artifact_id))
        return f"{scope}artifact:{artifact_id}"

    def artifact_expiry(self, shard: int) -> str:
        return f"{self._artifact_scope(shard)}artifact_expiry"

    def artifact_expiry_of(self, artifact_id: str) -> str:
        return self.artifact_expiry(self.artifact_shard(artifact_id))


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class LegacyKeys:
    """The previous layout's names (one Redis, no hash tags), read only by `migrate.py`.

    ``{p}wallet:{tenant}``, ``ledger:``, ``ledger_order:``, ``holds:``, ``hold_expiry:``,
    ``tenant_keys:``, ``tenant_tasks:``, ``task_seq:`` (by tenant); ``rate:{api_key_id}``,
    ``idem:{scope}``, ``done:{call_id}``, ``task:{task_id}``, ``task_fence:{task_id}``,
    ``task_index:{status}:{capability}:{tenant}``, ``artifact:{artifact_id}``; and the global
    ``task_queue`` (stream), ``tasks_queued``, ``tasks_unconfirmed``, ``task_expiry``,
    ``artifact_expiry``.
    """

    TENANT_KINDS = (
        "wallet",
        "ledger",
        "ledger_order",
        "holds",
        "hold_expiry",
        "tenant_keys",
        "tenant_tasks",
        "task_seq",
    )
    """Keys named by their tenant alone, and moved as they are."""
    OTHER_KINDS = ("rate", "idem", "done", "task", "task_fence", "task_index", "artifact")
    GLOBALS = ("task_queue", "tasks_queued", "tasks_unconfirmed", "task_expiry", "artifact_expiry")

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "gw:") -> None:
        self.prefix = prefix

    def pattern(self) -> str:
        """Every key of the prefix (the old ones are told apart by `kind_of`)."""
        return f"{_glob_escape(self.prefix)}*"

    def kind_of(self, key: str) -> tuple[str, str] | None:
        """(kind, rest) of an old key (rest: the tenant, id or scope after ``kind:``); None for
        any other key of the prefix, the new layout's included."""
        if not key.startswith(self.prefix):
            return None
        name = key[len(self.prefix) :]
        if name in self.GLOBALS:
            return name, ""
        kind, sep, rest = name.partition(":")
        if sep and (kind in self.TENANT_KINDS or kind in self.OTHER_KINDS):
            return kind, rest
        return None

    def global_key(self, kind: str) -> str:
        return f"{self.prefix}{kind}"

    def key(self, kind: str, rest: str) -> str:
        return f"{self.prefix}{kind}:{rest}"
