"""Keys as the unit of governance: what an operator may set on a key, checked once for the
admin API and the CLI, and the key's budget as it stands now.

`KeyFields` is the body of `POST /admin/v1/keys` and `PATCH /admin/v1/keys/{id}` (and what the
CLI's flags fill): a field left out keeps what the key has, `null` removes it. Every problem
is a 422 `validation_error` naming its field (`budget.credits`, `expires_at`, ...); the CLI
names the flag instead (`FLAGS`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

import msgspec
from msgspec import UNSET, UnsetType

from gateway.billing.money import format_credits, parse_credits
from gateway.config.loader import GatewayConfig, Tenant
from gateway.errors import ErrorDetail, ValidationFailed
from gateway.schemas.times import iso
from gateway.store.base import ApiKeyRecord, KeyBudget, KeySettings, Store
from gateway.store.periods import PERIODS, BudgetPeriod, period_bounds

__all__ = [
    "FLAGS",
    "MAX_METADATA",
    "BudgetFields",
    "BudgetState",
    "KeyFields",
    "budget_state",
    "key_budget",
    "parse_time",
    "settings_of",
]

MAX_METADATA = 16
_MAX_NAME = 64
_MAX_META_TEXT = 500

FLAGS = {
    "name": "--name",
    "models": "--models",
    "budget": "--budget",
    "budget.credits": "--budget",
    "budget.period": "--period",
    "expires_at": "--expires",
    "requests_per_minute": "--rpm",
    "tokens_per_minute": "--tpm",
    "metadata": "--metadata",
}
"""The CLI flag of each field, for its one-line refusals."""


class BudgetFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    credits: str | int
    period: str


class KeyFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str | UnsetType | None = UNSET
    models: list[str] | UnsetType | None = UNSET
    budget: BudgetFields | UnsetType | None = UNSET
    expires_at: str | UnsetType | None = UNSET
    requests_per_minute: int | UnsetType | None = UNSET
    tokens_per_minute: int | UnsetType | None = UNSET
    metadata: dict[str, str] | UnsetType | None = UNSET


@dataclass(frozen=True, slots=True)
class BudgetState:
    """A key's budget now: `resets_at` None for `total` (it never resets)."""

    units: int
    period: BudgetPeriod
    spent: int
    resets_at: float | None

    @property
    def remaining(self) -> int:
        return max(0, self.units - self.spent)

    def view(self) -> dict[str, str | None]:
        """As the Key object and `GET /v1/wallet` show it."""
        return {
            "credits": format_credits(self.units),
            "period": self.period,
            "spent": format_credits(self.spent),
            "remaining": format_credits(self.remaining),
            "resets_at": iso(self.resets_at) if self.resets_at is not None else None,
        }


async def budget_state(store: Store, record: ApiKeyRecord, now: float) -> BudgetState | None:
    return await key_budget(store, record.tenant, record.key_id, record.settings.budget, now)


async def key_budget(
    store: Store, tenant: str, key_id: str, budget: KeyBudget | None, now: float
) -> BudgetState | None:
    """The key's budget now (None without one)."""
    if budget is None:
        return None
    spent = await store.key_spent(tenant, key_id, budget.period)
    _, resets_at = period_bounds(budget.period, now)
    return BudgetState(budget.units, budget.period, spent, resets_at)


def settings_of(
    base: KeySettings, fields: KeyFields, tenant: Tenant, config: GatewayConfig, now: float
) -> KeySettings:
    """`base` changed by `fields`; ValidationFailed naming every field that is wrong."""
    problems: list[ErrorDetail] = []
    changes: dict[str, object] = {}

    def bad(field: str, message: str) -> None:
        problems.append(ErrorDetail(field=field, message=message))

    if fields.name is not UNSET:
        name = fields.name or ""
        if fields.name is not None and not (1 <= len(name) <= _MAX_NAME and name.isprintable()):
            bad("name", f"1 to {_MAX_NAME} printable characters")
        changes["name"] = name
    if fields.models is not UNSET:
        models = fields.models or []
        if models == ["*"] or not models:
            changes["models"] = ()
        else:
            unknown = [m for m in models if m not in config.models or not tenant.may_use(m)]
            if unknown:
                bad("models", f"not models of this tenant: {', '.join(unknown)} ('*' = all)")
            changes["models"] = tuple(dict.fromkeys(models))
    if fields.budget is not UNSET:
        changes["budget"] = _budget(fields.budget, bad)
    if fields.expires_at is not UNSET:
        expires = None
        if fields.expires_at is not None:
            try:
                expires = parse_time(fields.expires_at)
            except ValueError:
                bad("expires_at", "an ISO 8601 time, e.g. 2026-12-31T00:00:00Z")
            else:
                if expires <= now:
                    bad("expires_at", "must be in the future")
        changes["expires_at"] = expires
    for field, cap in (
        ("requests_per_minute", tenant.limits.requests_per_minute),
        ("tokens_per_minute", tenant.limits.tokens_per_minute),
    ):
        value = getattr(fields, field)
        if value is UNSET:
            continue
        if value is not None and (value < 1 or (cap > 0 and value > cap)):
            bad(field, f"an integer from 1 to the tenant's {cap}" if cap > 0 else "at least 1")
        changes[field] = value
    if fields.metadata is not UNSET:
        metadata = fields.metadata or {}
        too_long = any(
            len(k) > _MAX_META_TEXT or len(v) > _MAX_META_TEXT for k, v in metadata.items()
        )
        if len(metadata) > MAX_METADATA or too_long:
            bad(
                "metadata",
                f"at most {MAX_METADATA} pairs of strings up to {_MAX_META_TEXT} characters",
            )
        changes["metadata"] = dict(metadata)
    if problems:
        raise ValidationFailed(
            "; ".join(f"{p.field}: {p.message}" for p in problems), details=problems
        )
    return msgspec.structs.replace(base, **changes)


def _budget(fields: BudgetFields | None, report: Callable[[str, str], None]) -> KeyBudget | None:
    if fields is None:
        return None
    units = 0
    try:
        units = parse_credits(str(fields.credits))
        if units < 0:
            raise ValueError("negative")
    except ValueError:
        report("budget.credits", "a credit amount of 0 or more, at most four decimals")
    if fields.period not in get_args(BudgetPeriod):
        report("budget.period", f"one of {', '.join(PERIODS)}")
        return None
    period: BudgetPeriod = fields.period  # type: ignore[assignment]
    return KeyBudget(units=units, period=period)


def parse_time(text: str) -> float:
    """An ISO 8601 time (UTC when it names no offset) as seconds since the epoch."""
    value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()
