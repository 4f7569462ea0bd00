"""The /admin/v1 request and answer shapes, for the OpenAPI document (docs/operations.md,
"Admin API"): `gateway.api.admin_views` renders the answers, and tests check real answers
against the schema made from these Structs. Money is a four-decimal string, times ISO 8601 UTC.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from gateway.schemas.tasks import Timestamp

__all__ = [
    "AdminCallback",
    "AdminKey",
    "AdminKeyList",
    "AdminTask",
    "AdminTaskList",
    "CallbackSecret",
    "CreatedKey",
    "Entry",
    "FailedCallback",
    "FailedCallbackList",
    "KeyBudgetRequest",
    "KeyBudgetView",
    "KeyCounts",
    "KeyFieldsRequest",
    "LedgerEntryRequest",
    "NewKeyRequest",
    "RotateKeyRequest",
    "RoutingBreaker",
    "RoutingModel",
    "RoutingView",
    "Tenant",
    "TenantList",
    "UsageRow",
    "UsageView",
]

Credits = Annotated[str, Meta(extra_json_schema={"pattern": "^-?[0-9]+\\.[0-9]{4}$"})]


class _Closed(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An object with exactly these fields."""


class KeyBudgetRequest(_Closed):
    """`credits`: a decimal string, at most four decimals; `period`: a calendar period in UTC
    (a day from 00:00, a week from Monday, a month from the 1st) or `total`."""

    credits: str
    period: Literal["day", "week", "month", "total"]


class KeyFieldsRequest(_Closed):
    """Every field optional. On a PATCH a field left out keeps what the key has and `null`
    removes it. `models`: a subset of the tenant's (`["*"]`: all of them); the rate limits at
    most the tenant's; `expires_at` in the future; `metadata` at most 16 string pairs."""

    name: Annotated[str, Meta(min_length=1, max_length=64)] | None = None
    models: list[str] | None = None
    budget: KeyBudgetRequest | None = None
    expires_at: Timestamp | None = None
    requests_per_minute: Annotated[int, Meta(ge=1)] | None = None
    tokens_per_minute: Annotated[int, Meta(ge=1)] | None = None
    metadata: dict[str, str] | None = None


class NewKeyRequest(KeyFieldsRequest, kw_only=True, forbid_unknown_fields=True):
    tenant: str


class RotateKeyRequest(_Closed):
    """`grace_seconds`: how long the old secret keeps working (0 to 30 days; default 0)."""

    grace_seconds: Annotated[float, Meta(ge=0, le=2_592_000)] = 0


class LedgerEntryRequest(_Closed):
    """`amount`: credits as a decimal string, at most four decimals (a grant > 0, an adjustment
    != 0). `id` (or the `Idempotency-Key` header; required): makes the entry happen once (a
    retry with the same id, amount and kind answers 200 with the first entry; after a 504
    `outcome_unknown`, retry with the same id); ids starting with `charge:`, `debit:`,
    `refund:`, `hold:` are the gateway's own and refused."""

    amount: str
    reason: str
    id: str | None = None


class KeyCounts(_Closed):
    active: int
    revoked: int


class Tenant(_Closed):
    id: str
    models: list[str]
    requests_per_minute: int
    tokens_per_minute: int
    balance: Credits
    held: Credits
    keys: KeyCounts


class TenantList(_Closed):
    object: Literal["list"]
    data: list[Tenant]
    has_more: bool
    next_after: str | None
    """The `after` of the next page when `has_more`."""


class KeyBudgetView(_Closed):
    """The key's budget now: `spent` in the current period (charges and debits less
    refunds), `remaining` = max(0, credits - spent), `resets_at` null for `total`."""

    credits: Credits
    period: Literal["day", "week", "month", "total"]
    spent: Credits
    remaining: Credits
    resets_at: Timestamp | None


class AdminKey(_Closed):
    """The Key object. `models` `["*"]`: every model of the tenant."""

    object: Literal["key"]
    id: str
    tenant: str
    name: str | None
    prefix: str
    created_at: Timestamp
    revoked_at: Timestamp | None
    expires_at: Timestamp | None
    models: list[str]
    budget: KeyBudgetView | None
    requests_per_minute: int | None
    tokens_per_minute: int | None
    metadata: dict[str, str]
    last_used_at: Timestamp | None


class CreatedKey(AdminKey, kw_only=True, forbid_unknown_fields=True):
    """The Key object and `key`, the secret, shown this once (only its hash is stored)."""

    key: str


class AdminKeyList(_Closed):
    object: Literal["list"]
    data: list[AdminKey]
    has_more: bool
    next_after: str | None
    """The `after` of the next page when `has_more`."""


class Entry(_Closed):
    id: str
    tenant: str
    kind: Literal["grant", "adjustment"]
    amount: Credits
    balance_after: Credits
    reason: str
    created_at: Timestamp


class UsageRow(_Closed):
    tenant: str
    model: str
    day: str
    requests: int
    tasks: int
    charged: Credits
    refunded: Credits
    spend: Credits


class UsageView(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename={"from_": "from"}):
    object: Literal["usage"]
    from_: Timestamp
    to: Timestamp
    has_more: bool
    next_after: str | None
    data: list[UsageRow]


class AdminTask(_Closed):
    id: str
    tenant: str
    capability: str
    model: str
    status: Literal["queued", "running", "succeeded", "failed", "canceled"]
    progress: float
    created_at: Timestamp
    finished_at: Timestamp | None
    cost: Credits


class AdminTaskList(_Closed):
    object: Literal["list"]
    data: list[AdminTask]
    has_more: bool
    next_after: str | None


_CallbackStatus = Literal["pending", "delivered", "retrying", "failed", "disabled"]


class CallbackSecret(_Closed):
    """A tenant's new signing secret for task callbacks (shown once); the one it replaced
    still signs every delivery for 24 hours."""

    object: Literal["callback_secret"]
    tenant: str
    secret: str
    created_at: Timestamp


class AdminCallback(_Closed):
    """A task's callback after a redelivery was asked for (the task's `callback` fields)."""

    object: Literal["callback"]
    task_id: str
    tenant: str
    url: str | None
    status: _CallbackStatus | None
    attempt_count: int
    delivered_at: Timestamp | None
    last_error: str | None
    next_attempt_at: Timestamp | None


class FailedCallback(_Closed):
    task_id: str
    tenant: str
    task_status: Literal["queued", "running", "succeeded", "failed", "canceled"]
    url: str | None
    callback_id: str | None
    status: _CallbackStatus | None
    attempt_count: int
    last_error: str | None
    finished_at: Timestamp | None


class FailedCallbackList(_Closed):
    object: Literal["list"]
    data: list[FailedCallback]


class RoutingModel(_Closed):
    id: str
    capabilities: list[str]
    provider: str
    upstream_model: str
    release_label: Literal["Available", "Preview", "Planned"]


class RoutingBreaker(_Closed):
    provider: str
    state: Literal["closed", "open", "half_open"]


class RoutingView(_Closed):
    config_version: str
    models: list[RoutingModel]
    auto: dict[str, str]
    breakers: list[RoutingBreaker]
