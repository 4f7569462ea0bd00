"""The store interface: operations that mean something, each atomic on every backend.

A request touches the store twice: `admit` on the way in (rate limits, idempotency reservation,
credit hold: all or nothing) and `settle` or `release` on the way out, all three carrying the
same `Call` (the call's identity, built once). A task is prepaid:
`create_task` debits it, a worker `claim_task`s and `touch_task`es it, `finalize_task` refunds
what was not delivered (once). Nothing here is a plain get/set: a caller can never read, decide
and write across an `await`.

Amounts are integer credit units (`gateway.billing.money.UNITS_PER_CREDIT` per credit).
Times are float seconds since the epoch.
"""

from __future__ import annotations

import enum
from typing import Any, Literal, Protocol

import msgspec

__all__ = [
    "TERMINAL",
    "Admission",
    "AdmissionOutcome",
    "AdmissionResult",
    "ApiKeyRecord",
    "ArtifactKind",
    "ArtifactRecord",
    "Call",
    "IdempotencyClaim",
    "LedgerEntry",
    "LedgerKind",
    "LedgerPage",
    "RateLimits",
    "RateState",
    "Release",
    "Settlement",
    "Store",
    "StoredReply",
    "TaskAbandon",
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

LedgerKind = Literal["grant", "debit", "charge", "refund", "adjustment"]


class ApiKeyRecord(msgspec.Struct, kw_only=True, frozen=True):
    key_id: str
    tenant: str
    created_at: float
    revoked_at: float | None = None
    prefix: str = ""
    """The key's first characters, shown to operators to tell keys apart ("" for keys issued
    before it was kept). Not secret: too short to guess the rest from."""


class RateLimits(msgspec.Struct, kw_only=True, frozen=True):
    """Per-API-key budgets, from the tenant's config entry. 0 tokens_per_minute = no token limit."""

    requests_per_minute: int
    tokens_per_minute: int = 0


class RateState(msgspec.Struct, kw_only=True, frozen=True):
    """The buckets after a check, for the x-ratelimit-* headers.

    Token buckets: capacity = the per-minute limit, refilled continuously at limit/60 per second.
    `reset_*_seconds` is the time until that bucket is full again; `retry_after_seconds` is set
    on a rate-limited outcome: the time until the request would fit.
    """

    limit_requests: int
    remaining_requests: int
    reset_requests_seconds: float
    limit_tokens: int = 0
    remaining_tokens: int = 0
    reset_tokens_seconds: float = 0.0
    retry_after_seconds: float = 0.0


class IdempotencyClaim(msgspec.Struct, kw_only=True, frozen=True):
    """scope = tenant + method + path + key (already joined by the caller)."""

    scope: str
    fingerprint: str
    lease_seconds: int = 900
    """How long an in-flight reservation lives if its request dies without releasing it."""


class StoredReply(msgspec.Struct, kw_only=True, frozen=True):
    """A 2xx response kept for replay. For a stream, `body` is the whole SSE byte stream."""

    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = {}


class AdmissionOutcome(enum.Enum):
    ADMITTED = "admitted"
    REPLAY = "replay"
    IN_PROGRESS = "in_progress"
    KEY_REUSED = "key_reused"
    RATE_LIMITED = "rate_limited"
    INSUFFICIENT_CREDITS = "insufficient_credits"
    ABANDONED = "abandoned"
    """The call was already released: an admission that reached the store after its caller
    gave up on it (see `Store.release`). Nothing was taken."""


class Call(msgspec.Struct, kw_only=True, frozen=True):
    """One call's identity, the same value from its admission to its settlement or release.

    Built once per call (by the chat service) and carried by `Admission`, `Settlement` and
    `Release`, so the three can never disagree on whose call it is or what it reserved.
    `call_id` is gateway-made and unique per call: it keys the hold and the ledger entries
    (`hold:<call_id>`, `charge:<call_id>`). `request_id` is the client-visible X-Request-Id,
    kept on ledger entries for correlation only (clients may repeat it). `tokens_reserved` is
    what admission takes from the tokens bucket (and settle or release reconciles).
    """

    tenant: str
    api_key_id: str
    call_id: str
    request_id: str
    limits: RateLimits
    tokens_reserved: int = 0
    idempotency: IdempotencyClaim | None = None


class Admission(msgspec.Struct, kw_only=True, frozen=True):
    """What a call asks of the store before it runs: its tokens (`call.tokens_reserved`), its
    idempotency claim, and a credit hold of `hold_units` for `hold_seconds`."""

    call: Call
    hold_units: int = 0
    hold_seconds: int = 900


class AdmissionResult(msgspec.Struct, kw_only=True, frozen=True):
    outcome: AdmissionOutcome
    rate: RateState
    reply: StoredReply | None = None
    available_units: int = 0
    """Balance minus active holds at the time of the check (informational)."""


class Settlement(msgspec.Struct, kw_only=True, frozen=True):
    """A call that ran: the hold becomes the charge, tokens are reconciled, the reply is kept.

    Running it twice for one call_id charges once.
    """

    call: Call
    charge_units: int
    tokens_used: int = 0
    reason: str = ""
    model: str = ""
    """The model that answered (after fallbacks), kept on the charge's ledger entry."""
    reply: StoredReply | None = None
    reply_ttl_seconds: int = 86_400


class Release(msgspec.Struct, kw_only=True, frozen=True):
    """A call that failed before it cost anything: give back hold, tokens and the key."""

    call: Call


class Wallet(msgspec.Struct, kw_only=True, frozen=True):
    tenant: str
    balance_units: int
    held_units: int


class LedgerEntry(msgspec.Struct, kw_only=True, frozen=True):
    id: str
    tenant: str
    kind: LedgerKind
    amount_units: int
    balance_after_units: int
    created_at: float
    reason: str = ""
    task_id: str | None = None
    request_id: str | None = None
    model: str = ""
    """The model a charge, debit or refund was for ("" for grants, adjustments and entries
    written before the ledger kept it)."""


class LedgerPage(msgspec.Struct, kw_only=True, frozen=True):
    entries: list[LedgerEntry]
    has_more: bool


class Store(Protocol):
    """Implemented by `gateway.store.sqlite.SqliteStore` and `gateway.store.redis.RedisStore`."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def ping(self) -> bool:
        """True when the store answers; never raises."""
        ...

    # API keys
    async def create_key(self, record: ApiKeyRecord, key_hash: str) -> None: ...
    async def get_key(self, key_hash: str) -> ApiKeyRecord | None: ...
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
        task_id: str,
        worker_id: str,
        *,
        lease_seconds: float,
        progress: TaskProgress | None = None,
        input: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        """Extend the lease and report progress (or a rewritten input) while `worker_id` runs
        the task; otherwise change nothing. Returns the task as it is either way (so a worker
        sees `cancel_requested_at`, or that it lost the task); None when unknown."""
        ...

    async def request_cancel(self, tenant: str, task_id: str) -> TaskRecord | None:
        """Queued: canceled now, refunded in full (unconfirmed: canceled, its hold released,
        nothing was charged). Running: `cancel_requested_at` is set (the worker stops between
        steps). Terminal: unchanged. None when unknown or another's."""
        ...

    async def finalize_task(self, final: TaskFinal) -> TaskRecord:
        """The terminal state and the refund, once: a task already terminal is returned
        unchanged. KeyError for an unknown task; ValueError for a refund above the price and
        for an unconfirmed task (never charged nor claimed)."""
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


# The task types build on the ones above, so they are imported (and re-exported) last.
from gateway.store.tasks import (  # noqa: E402
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
