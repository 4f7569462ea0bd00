"""Every Redis key the Redis store uses, in one place (ledger and hold ids: `ledger_ids.py`).

All keys start with the store's prefix (default ``gw:``) so one Redis can serve several
gateways or test runs. Keys that hold state which ends by itself carry a TTL (see
docs/store.md); wallets, ledgers and API keys live until deleted.

    {p}apikey:{key_hash}        hash    key_id, tenant, created_at, prefix, revoked_at?
    {p}apikey_id:{key_id}       string  key_hash (for revoke)
    {p}tenant_keys:{tenant}     zset    key_hash by created_at (for list)
    {p}wallet:{tenant}          hash    balance, seq (the ledger's sequence)
    {p}ledger:{tenant}          hash    entry id -> msgpack entry
    {p}ledger_order:{tenant}    zset    entry id by seq (newest-first paging)
    {p}holds:{tenant}           hash    hold:{call_id|task_id} -> units; total  TTL: last hold's
    {p}hold_expiry:{tenant}     zset    hold:{call_id} by expiry time      TTL: last hold's expiry
    {p}rate:{api_key_id}        hash    r, rt, t, tt (levels, times)       TTL: until both full
    {p}idem:{scope}             hash    fp, call, reply?                   TTL: lease, then reply
    {p}done:{call_id}           string  settled-or-released marker         TTL: 1 day
    {p}idem:{scope}             hash    fp, task (a task create's record)  TTL: reply_ttl_seconds
    {p}task:{task_id}           hash    the task's fields (redis/tasks.py), entry (its stream id);
                                        unconfirmed, idem (until confirm_task)
    {p}task_fence:{task_id}     string  an abandoned create (a late one takes nothing)  TTL: 1 day
    {p}tasks_unconfirmed        zset    task_id by creation time, until confirmed or abandoned
    {p}tenant_tasks:{tenant}    zset    task_id by the tenant's creation sequence (listing)
    {p}task_index:{status}:{capability}:{tenant}
                                zset    task_id by seq, the tenant's tasks in that status and/or
                                        of that capability ("" = any; filtered listing)
    {p}task_expiry              zset    msgpack [task_id, tenant, capability, status] by the time
                                        an ended task expires (the retention sweep)
    {p}task_index_version       string  the listing indexes' version the tasks were backfilled to
    {p}task_seq:{tenant}        string  the tenant's last task sequence number
    {p}task_queue               stream  one entry (task=<id>) per created task; group "workers"
    {p}tasks_queued             set     ids of the queued tasks (the queue depth)
    {p}artifact:{artifact_id}   string  msgpack ArtifactRecord
    {p}artifact_expiry          zset    artifact_id by expires_at (the expiry sweep)

Task scripts append ids they read to prefixes made here (so every format stays here): a task
named by an idempotency record (`task_key_prefix()` + id), a task's tenant's wallet and ledger
keys (`wallet("")` + tenant, ...), and a task's index zsets, from `task_index_template()` (its
three slots filled by `index_key` in task_common.lua). A task that ended expires
`task_retention_days` later (its hash's TTL; the sweep removes its index entries); artifacts
have no TTL (the sweep deletes them).
"""

from __future__ import annotations

__all__ = ["TASK_GROUP", "RedisKeys"]

TASK_GROUP = "workers"
"""The consumer group of the task queue stream (each worker is a consumer, by its id)."""


class RedisKeys:
    """Builds the store's keys under one prefix."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "gw:") -> None:
        self.prefix = prefix

    def api_key(self, key_hash: str) -> str:
        return f"{self.prefix}apikey:{key_hash}"

    def api_key_id(self, key_id: str) -> str:
        return f"{self.prefix}apikey_id:{key_id}"

    def tenant_keys(self, tenant: str) -> str:
        return f"{self.prefix}tenant_keys:{tenant}"

    def wallet(self, tenant: str) -> str:
        return f"{self.prefix}wallet:{tenant}"

    def ledger(self, tenant: str) -> str:
        return f"{self.prefix}ledger:{tenant}"

    def ledger_order(self, tenant: str) -> str:
        return f"{self.prefix}ledger_order:{tenant}"

    def holds(self, tenant: str) -> str:
        return f"{self.prefix}holds:{tenant}"

    def hold_expiry(self, tenant: str) -> str:
        return f"{self.prefix}hold_expiry:{tenant}"

    def rate(self, api_key_id: str) -> str:
        return f"{self.prefix}rate:{api_key_id}"

    def idempotency(self, scope: str) -> str:
        return f"{self.prefix}idem:{scope}"

    def done(self, call_id: str) -> str:
        return f"{self.prefix}done:{call_id}"

    def task(self, task_id: str) -> str:
        return f"{self.prefix}task:{task_id}"

    def task_fence(self, task_id: str) -> str:
        return f"{self.prefix}task_fence:{task_id}"

    def tasks_unconfirmed(self) -> str:
        return f"{self.prefix}tasks_unconfirmed"

    def task_key_prefix(self) -> str:
        """`task(id)` without the id: scripts append an id they read (an idempotency record's)."""
        return self.task("")

    def tenant_tasks(self, tenant: str) -> str:
        return f"{self.prefix}tenant_tasks:{tenant}"

    def task_index(self, tenant: str, status: str = "", capability: str = "") -> str:
        """The tenant's tasks in `status` and/or of `capability` ("" = any, not both)."""
        return f"{self.prefix}task_index:{status}:{capability}:{tenant}"

    def task_indexes(self, tenant: str, status: str, capability: str) -> tuple[str, str, str]:
        """The index zsets a task is in: by status, by capability, by both."""
        return (
            self.task_index(tenant, status),
            self.task_index(tenant, capability=capability),
            self.task_index(tenant, status, capability),
        )

    def task_index_template(self) -> str:
        """`task_index` with slots (NUL then t, s, c) that task_common.lua's `index_key` fills."""
        return self.task_index("\0t", "\0s", "\0c")

    def task_pattern(self) -> str:
        """A SCAN pattern of every `task(id)` (the prefix's own glob characters escaped)."""
        return "".join("\\" + c if c in "*?[]\\" else c for c in self.task("")) + "*"

    def task_expiry(self) -> str:
        return f"{self.prefix}task_expiry"

    def task_index_version(self) -> str:
        return f"{self.prefix}task_index_version"

    def task_seq(self, tenant: str) -> str:
        return f"{self.prefix}task_seq:{tenant}"

    def task_queue(self) -> str:
        return f"{self.prefix}task_queue"

    def tasks_queued(self) -> str:
        return f"{self.prefix}tasks_queued"

    def artifact(self, artifact_id: str) -> str:
        return f"{self.prefix}artifact:{artifact_id}"

    def artifact_expiry(self) -> str:
        return f"{self.prefix}artifact_expiry"

    def pattern(self) -> str:
        """A SCAN pattern matching every key of this prefix (tests, maintenance)."""
        return f"{self.prefix}*"
