"""The store interface: operations that mean something, each atomic on every backend.

A request touches the store twice: `admit` on the way in (rate limits, idempotency reservation,
credit hold: all or nothing) and `settle` or `release` on the way out, all three carrying the
same `Call` (the call's identity, built once). A task is prepaid:
`create_task` holds its price and `confirm_task` debits it, a worker `claim_task`s and
`touch_task`es it, `finalize_task` refunds what was not delivered (once). Nothing here is a
plain get/set: a caller can never read, decide and write across an `await`. The value types
are `records.py`'s (keys, calls, money), `tasks.py`'s (tasks, artifacts) and `responses.py`'s
(stored Responses API responses), re-exported here.

Amounts are integer credit units (`gateway.billing.money.UNITS_PER_CREDIT` per credit).
Times are float seconds since the epoch.
"""

from __future__ import annotations

from typing import Any, Protocol

from gateway.store.callbacks import (
    CallbackAttempt,
    CallbackSecrets,
    CallbackStatus,
    TaskCallback,
)
from gateway.store.periods import BudgetPeriod
from gateway.store.records import (
    Admission,
    AdmissionOutcome,
    AdmissionResult,
    ApiKeyRecord,
    Call,
    IdempotencyClaim,
    KeyBudget,
    KeySettings,
    LedgerEntry,
    LedgerKind,
    LedgerPage,
    RateLimits,
    RateState,
    Release,
    Settlement,
    StoredReply,
    Wallet,
)
from gateway.store.responses import ItemOrder, ItemsPage, StoredResponse
from gateway.store.tasks import (
    TERMINAL,
    ArtifactKind,
    ArtifactRecord,
    TaskAbandon,
    TaskConfirm,
    TaskCreate,
    TaskCreateOutcome,
    TaskCreateResult,
    TaskFinal,
    TaskPage,
    TaskProgress,
    TaskRecord,
    TaskStatus,
    TerminalStatus,
)

__all__ = [
    "TERMINAL",
    "Admission",
    "AdmissionOutcome",
    "AdmissionResult",
    "ApiKeyRecord",
    "ArtifactKind",
    "ArtifactRecord",
    "Call",
    "CallbackAttempt",
    "CallbackSecrets",
    "CallbackStatus",
    "IdempotencyClaim",
    "ItemOrder",
    "ItemsPage",
    "KeyBudget",
    "KeySettings",
    "LedgerEntry",
    "LedgerKind",
    "LedgerPage",
    "RateLimits",
    "RateState",
    "Release",
    "Settlement",
    "Store",
    "StoredReply",
    "StoredResponse",
    "TaskAbandon",
    "TaskCallback",
    "TaskConfirm",
    "TaskCreate",
    "TaskCreateOutcome",
    "TaskCreateResult",
    "TaskFinal",
    "TaskPage",
    "TaskProgress",
    "TaskRecord",
    "TaskStatus",
    "TerminalStatus",
    "Wallet",
]


class Store(Protocol):
    """Implemented by `gateway.store.sqlite.SqliteStore` and `gateway.store.redis.RedisStore`."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def ping(self) -> bool:
        """True when the store answers; never raises."""
        ...

    # API keys
    async def create_key(self, record: ApiKeyRecord, key_hash: str) -> None: ...
    async def get_key(self, key_hash: str, tag: str | None = None) -> ApiKeyRecord | None:
        """The key whose secret hashes to `key_hash`; `tag` is the slot tag the secret carries
        (`gateway.store.key_tags`; None for a secret issued without one). A rotated key's old
        secret finds the record with `valid_until` set."""
        ...

    async def update_key(self, key_id: str, settings: KeySettings) -> ApiKeyRecord | None:
        """Replace the key's settings; the record after, None when there is no such key."""
        ...

    async def rotate_key(
        self, key_id: str, key_hash: str, prefix: str, *, grace_seconds: float
    ) -> ApiKeyRecord | None:
        """The key's secret becomes `key_hash` (same id, settings and spend); the old one
        still finds the key for `grace_seconds` (a secret retired before goes at once). None
        when there is no such key or it is revoked."""
        ...

    async def key_spent(self, tenant: str, key_id: str, period: BudgetPeriod) -> int:
        """What the key spent (charges and debits less refunds) in the current `period`."""
        ...

    async def revoke_key(self, key_id: str) -> bool:
        """False when no such key; revoking twice is fine (True)."""
        ...

    async def list_keys(self, tenant: str) -> list[ApiKeyRecord]: ...
    async def key_by_id(self, key_id: str) -> ApiKeyRecord | None:
        """The record of the key with this id (`key_...`); None when there is none."""
        ...

    # Request path
    async def admit(self, admission: Admission) -> AdmissionResult: ...
    async def settle(self, settlement: Settlement) -> int:
        """Returns the balance in units after the charge."""
        ...

    async def release(self, release: Release) -> None:
        """Idempotent. Also fences the call: a later `admit` of the same call_id (one written
        before its caller gave up, reaching the store late) is ABANDONED and takes nothing."""
        ...

    # Wallet
    async def grant(
        self,
        tenant: str,
        amount_units: int,
        *,
        entry_id: str,
        reason: str,
        kind: LedgerKind = "grant",
    ) -> LedgerEntry:
        """Append a ledger entry once per entry_id; a second call returns the first entry."""
        ...

    async def wallet(self, tenant: str) -> Wallet: ...
    async def ledger(self, tenant: str, *, limit: int, after: str | None = None) -> LedgerPage:
        """Newest first; `after` is an entry id from a previous page (unknown id: empty page)."""
        ...

    async def ledger_entry(self, tenant: str, entry_id: str) -> LedgerEntry | None:
        """The tenant's entry with this id; None when there is none."""
        ...

    async def ledger_range(
        self, tenant: str, *, since: float, until: float, limit: int, after: str | None = None
    ) -> LedgerPage:
        """Oldest first: the entries stamped from `since` up to (not including) `until`.

        Entries are stamped in their sequence order (under the write lock; Redis's clock), so
        the range is found by bisecting the sequence, never by scanning the whole ledger; were
        a clock ever stepped back, the page is still the contiguous run of the sequence from
        the first entry stamped at or after `since` to the first at or after `until`. `after`
        is the last entry id of the previous page (unknown id: empty page)."""
        ...

    # Tasks (prepaid media generation; see gateway/store/tasks.py)
    async def create_task(self, create: TaskCreate) -> TaskCreateResult:
        """One atomic step: the requests bucket (as `admit`), the idempotency record, a credit
        hold of the price for `hold_seconds` (against balance minus active holds) and the task,
        unconfirmed: it reads as `queued` by its id, but it is in no listing and no queue and
        nothing is charged until `confirm_task`. ABANDONED when `abandon_task` fenced this id
        first."""
        ...

    async def confirm_task(self, confirm: TaskConfirm) -> TaskRecord | None:
        """One atomic, idempotent step: an unconfirmed task's hold becomes its debit, the task
        is listed and queued for workers. A task confirmed (or canceled) before is returned as
        it is; None when there is no such task (it was abandoned)."""
        ...

    async def abandon_task(self, abandon: TaskAbandon) -> None:
        """One atomic, idempotent step: an unconfirmed task is removed whole (hold, record,
        listing, its idempotency record) and its id is fenced, so a `create_task` of it that
        reaches the store later is ABANDONED. A confirmed task is left as it is."""
        ...

    async def abandon_unconfirmed(self, *, older_than: float, limit: int = 100) -> int:
        """Abandon tasks left unconfirmed for `older_than` seconds (a gateway that died between
        the two create steps: their holds have expired by then); returns how many."""
        ...

    async def get_task(self, tenant: str, task_id: str) -> TaskRecord | None:
        """None for an unknown task and for another tenant's (it is invisible)."""
        ...

    async def list_tasks(
        self,
        tenant: str,
        *,
        limit: int,
        after: str | None = None,
        status: TaskStatus | None = None,
        capability: str | None = None,
    ) -> TaskPage:
        """Newest first; `after` is a task id from the previous page (unknown id: empty page).
        Costs O(limit) on both backends whatever the filters, however many tasks do not match
        (an index per filter combination)."""
        ...

    async def claim_task(
        self,
        worker_id: str,
        *,
        lease_seconds: float,
        wait_seconds: float = 0.0,
        max_attempts: int = 3,
    ) -> TaskRecord | None:
        """The next task to run, now `running` under `worker_id`'s lease; None after waiting up
        to `wait_seconds`. Tasks whose lease ran out come first, then the oldest queued one. A
        task that would exceed `max_attempts` is failed (`worker_lost`) and refunded instead.

        On Redis a vanished worker's task is found once its queue entry has been idle for the
        caller's `lease_seconds`: workers should share one lease setting."""
        ...

    async def touch_task(
        self,
        tenant: str,
        task_id: str,
        worker_id: str,
        *,
        lease_seconds: float,
        progress: TaskProgress | None = None,
        input: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        """Extend the lease and report progress (or a rewritten input) while `worker_id` runs
        the task; otherwise change nothing. Returns the task as it is either way (so a worker
        sees `cancel_requested_at`, or that it lost the task); None when unknown (or
        another tenant's)."""
        ...

    async def request_cancel(self, tenant: str, task_id: str) -> TaskRecord | None:
        """Queued: canceled now, refunded in full (unconfirmed: canceled, its hold released,
        nothing was charged). Running: `cancel_requested_at` is set (the worker stops between
        steps). Terminal: unchanged. None when unknown or another's."""
        ...

    async def finalize_task(self, final: TaskFinal) -> TaskRecord:
        """The terminal state and the refund, once: a task already terminal is returned
        unchanged. KeyError for an unknown task (or another tenant's: `final.tenant`);
        ValueError for a refund above the price and for an unconfirmed task (never charged
        nor claimed)."""
        ...

    async def task_queue_depth(self) -> int:
        """Queued tasks (a metric)."""
        ...

    # Task retention (see docs/store.md, "Task listing and retention")
    def set_task_retention(self, seconds: float) -> None:
        """How long a task is kept once it ended (`task_retention_days`; default
        `TASK_RETENTION_SECONDS`). Redis: for the tasks that end from now on (each gets its TTL
        then); SQLite: for every ended task, at the next sweep. Queued and running tasks are
        never removed."""
        ...

    async def sweep_tasks(self, *, limit: int = 500) -> int:
        """One bounded round of retention: up to `limit` tasks whose retention ran out leave
        the store (SQLite: their rows; Redis: their listing entries, their hashes having
        expired by TTL). Returns how many; a full `limit` means there may be more."""
        ...

    async def backfill_task_indexes(self) -> int:
        """Once per store (idempotent): tasks written before the listing indexes existed are
        put in them, and those that ended get their retention. Redis only (SQLite builds its
        indexes when it migrates the file); returns how many tasks it indexed."""
        ...

    # Artifacts (metadata; the bytes are in blob storage)
    async def create_artifact(self, record: ArtifactRecord) -> None:
        """Replaces a record with the same artifact_id."""
        ...

    async def get_artifact(self, tenant: str | None, artifact_id: str) -> ArtifactRecord | None:
        """None for an unknown artifact and for another tenant's. `tenant=None` skips that
        check, for a caller that proved access otherwise (a signed URL)."""
        ...

    async def expired_artifacts(self, now: float, limit: int) -> list[ArtifactRecord]:
        """Artifacts whose `expires_at` is at or before `now`, soonest expired first."""
        ...

    async def delete_artifact(self, artifact_id: str) -> None:
        """Idempotent."""
        ...

    # Stored responses of the Responses API (see docs/store.md, "Stored responses")
    async def put_response(self, record: StoredResponse) -> None:
        """Keeps `record` for its tenant until its `expires_at` (replaces one with the same
        tenant and id)."""
        ...

    async def get_response(self, tenant: str, response_id: str) -> StoredResponse | None:
        """None for an unknown, expired or deleted response, and for another tenant's."""
        ...

    async def delete_response(self, tenant: str, response_id: str) -> bool:
        """False when `get_response` would have given None."""
        ...

    async def response_input_items(
        self,
        tenant: str,
        response_id: str,
        *,
        limit: int,
        after: str | None = None,
        order: ItemOrder = "desc",
    ) -> ItemsPage | None:
        """A page of the response's input items (`gateway.store.responses.page_items`); None
        when `get_response` would have given None."""
        ...

    # Task callbacks (see gateway/store/callbacks.py)
    async def ensure_callback_secret(self, tenant: str, secret: str) -> CallbackSecrets:
        """The tenant's signing secrets; `secret` becomes its secret when it has none yet
        (one atomic step: concurrent first creates agree on one)."""
        ...

    async def rotate_callback_secret(
        self, tenant: str, secret: str, *, grace_seconds: float
    ) -> CallbackSecrets:
        """`secret` replaces the tenant's secret, which is still sent for `grace_seconds`."""
        ...

    async def callback_secrets(self, tenant: str) -> CallbackSecrets | None: ...

    async def claim_callbacks(self, *, lease_seconds: float, limit: int) -> list[TaskRecord]:
        """Up to `limit` due deliveries (their task ended, their next attempt is due, no live
        lease), each now under a new lease (`callback.lease_token`) for `lease_seconds`: until
        it runs out, no other claim returns it."""
        ...

    async def record_callback_attempt(self, attempt: CallbackAttempt) -> TaskRecord | None:
        """One attempt's outcome: `attempt_count` + 1, the status, and the schedule (again at
        `next_attempt_at` when `retrying`, else off it; `failed` and `disabled` ones listed
        by `failed_callbacks`). None, changing nothing, when the lease is no longer
        `attempt.lease_token`'s (it ran out and another claim took it) or the task is gone."""
        ...

    async def redeliver_callback(self, tenant: str, task_id: str) -> TaskRecord | None:
        """One more attempt of an ended task's callback, due now, with the same id (a
        delivered, failed or disabled one: once, a failure is final; one still scheduled:
        due now unless an attempt is under way). A task without a callback, or not ended,
        is returned unchanged; None when unknown or another tenant's."""
        ...

    async def failed_callbacks(self, *, limit: int) -> list[TaskRecord]:
        """Tasks whose callback ended `failed` or `disabled`, most recent first."""
        ...

    async def callback_backlog(self) -> int:
        """Deliveries scheduled and not yet delivered, failed or disabled (a metric)."""
        ...
