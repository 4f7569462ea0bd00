"""The store's value types: what its operations take and return for keys, calls and money.

`base.py` (the `Store` protocol) re-exports them with the task types of `tasks.py`.
"""

from __future__ import annotations

import enum
from typing import Literal

import msgspec

from gateway.config.limits import RateLimits
from gateway.store.periods import BudgetPeriod

__all__ = [
    "Admission",
    "AdmissionOutcome",
    "AdmissionResult",
    "ApiKeyRecord",
    "Call",
    "IdempotencyClaim",
    "KeyBudget",
    "KeySettings",
    "LedgerEntry",
    "LedgerKind",
    "LedgerPage",
    "RateLimits",
    "RateState",
    "Release",
    "Settlement",
    "StoredReply",
    "Wallet",
]

LedgerKind = Literal["grant", "debit", "charge", "refund", "adjustment"]


class KeyBudget(msgspec.Struct, kw_only=True, frozen=True):
    """What a key may spend per calendar period (`gateway.store.periods`), in units."""

    units: int
    period: BudgetPeriod


class KeySettings(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """A key's governance, every field optional: a key without them behaves as a plain key.

    `models` empty = every model of the tenant (`["*"]` at the edge); the rate limits apply
    below the tenant's (the lower one wins); `metadata` is the operator's, at most 16 pairs.
    Kept as one msgpack blob on both stores, replaced whole by an update."""

    name: str = ""
    models: tuple[str, ...] = ()
    budget: KeyBudget | None = None
    expires_at: float | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    metadata: dict[str, str] = {}


class ApiKeyRecord(msgspec.Struct, kw_only=True, frozen=True):
    key_id: str
    tenant: str
    created_at: float
    revoked_at: float | None = None
    prefix: str = ""
    """The key's first characters, shown to operators to tell keys apart ("" for keys issued
    before it was kept). Not secret: too short to guess the rest from."""
    settings: KeySettings = KeySettings()
    valid_until: float | None = None
    """Set on the record a rotated key's old secret finds: the end of its grace."""
    last_used_at: float | None = None
    """When an admission last took this key (Redis: shared; SQLite: this process's)."""


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
    KEY_BUDGET_EXCEEDED = "key_budget_exceeded"
    """The wallet covers the hold but the key's budget for this period does not."""
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
    budget: KeyBudget | None = None
    """The key's budget: a hold must fit in it as well as in the wallet."""


class Admission(msgspec.Struct, kw_only=True, frozen=True):
    """What a call asks of the store before it runs: its tokens (`call.tokens_reserved`), its
    idempotency claim, and a credit hold of `hold_units` for `hold_seconds`.

    With `min_hold_units` (0 < min < hold) the hold is wallet-bounded: when the available
    balance is below `hold_units` but at least `min_hold_units`, the store holds all that is
    available (a call that then asks its upstream for fewer output tokens), and reserves
    tokens in proportion: `min_tokens_reserved` at the minimum hold, `call.tokens_reserved` at
    the full one (`AdmissionResult.hold_units`, `.tokens_reserved` say what was taken)."""

    call: Call
    hold_units: int = 0
    hold_seconds: int = 900
    min_hold_units: int = 0
    """0: the whole hold or nothing."""
    min_tokens_reserved: int = 0


class AdmissionResult(msgspec.Struct, kw_only=True, frozen=True):
    outcome: AdmissionOutcome
    rate: RateState
    reply: StoredReply | None = None
    available_units: int = 0
    """Balance minus active holds at the time of the check (informational)."""
    hold_units: int = 0
    """The hold placed: the admission's `hold_units`, or less when wallet-bounded (0 unless
    ADMITTED)."""
    tokens_reserved: int = 0
    """The tokens reserved (before the bucket's cap): the call's, or fewer with a smaller hold;
    what its settlement or release reconciles (0 unless ADMITTED)."""


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
    key_id: str = ""
    """The API key a charge, debit or refund was for: its spend in the entry's period moves
    with it ("" for grants, adjustments and entries written before the ledger kept it)."""


class LedgerPage(msgspec.Struct, kw_only=True, frozen=True):
    entries: list[LedgerEntry]
    has_more: bool
