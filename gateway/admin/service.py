"""The operations of administration, with their rules, for the HTTP API and the CLI alike.

Each function takes the store and the routing file in force (the API reads the live one per
request) and plain values, and returns records; money stays in units. Mistakes raise the
gateway's errors (`TenantNotFound`, `KeyNotFound`, `ValidationFailed` naming the field,
`EntryIdReused`), which the API renders as the envelope and the CLI as one line and an exit
code. Tenants are the routing file's: a tenant it does not declare is unknown everywhere.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Literal

from gateway.admin.keys import KeyFields, settings_of
from gateway.auth import hash_api_key, issuing
from gateway.auth.issuing import UnknownTenant, check_tenant, issue_key
from gateway.billing.money import format_credits, parse_credits
from gateway.config.loader import GatewayConfig
from gateway.config.schema import CAPABILITIES, ModelEntry
from gateway.errors import (
    EntryIdReused,
    ErrorDetail,
    KeyNotFound,
    OutcomeUnknown,
    StoreUnavailable,
    TenantNotFound,
    ValidationFailed,
)
from gateway.routing.breakers import BreakerState
from gateway.routing.resolver import Router
from gateway.store.base import (
    ApiKeyRecord,
    KeySettings,
    LedgerEntry,
    Store,
    TaskStatus,
    Wallet,
)
from gateway.store.key_tags import split_tag

__all__ = [
    "RESERVED_ENTRY_PREFIXES",
    "TASK_STATUSES",
    "EntryKind",
    "EntryResult",
    "RoutingTable",
    "TenantSummary",
    "add_entry",
    "create_key",
    "invalid",
    "list_keys",
    "new_entry_id",
    "outcome_unknown",
    "require_tenant",
    "revoke_key",
    "rotate_key",
    "routing_table",
    "tenant_summaries",
    "tenant_summary",
    "update_key",
]

EntryKind = Literal["grant", "adjustment"]

TASK_STATUSES: tuple[TaskStatus, ...] = ("queued", "running", "succeeded", "failed", "canceled")

MAX_GRACE_SECONDS = 30 * 86_400
"""The longest a rotated key's old secret may keep working."""

RESERVED_ENTRY_PREFIXES = ("charge:", "debit:", "refund:", "hold:")
"""Ids the gateway gives its own entries (`gateway.store.ledger_ids`): an operator's entry
under one of them could stand in for a call's charge or a task's debit, so they are refused."""

_MAX_ENTRY_ID = 200
_MAX_REASON = 500


def invalid(field: str, message: str) -> ValidationFailed:
    """422 naming the field (the CLI prints it as `--field: message`)."""
    return ValidationFailed(
        f"{field}: {message}", details=[ErrorDetail(field=field, message=message)]
    )


def require_tenant(config: GatewayConfig, tenant: str) -> None:
    """TenantNotFound, naming the routing file and its tenants, unless `tenant` is declared."""
    try:
        check_tenant(config, tenant)
    except UnknownTenant as exc:
        raise TenantNotFound(str(exc)) from None


# Tenants ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TenantSummary:
    name: str
    models: list[str]
    """As the routing file declares them ("*": every model)."""
    requests_per_minute: int
    tokens_per_minute: int
    wallet: Wallet
    active_keys: int
    revoked_keys: int


async def tenant_summary(store: Store, config: GatewayConfig, name: str) -> TenantSummary:
    require_tenant(config, name)
    tenant = config.tenants[name]
    entry = config.file.tenants.get(name)
    keys = await store.list_keys(name)
    revoked = sum(1 for key in keys if key.revoked_at is not None)
    return TenantSummary(
        name=name,
        models=list(entry.models) if entry is not None else ["*"],
        requests_per_minute=tenant.limits.requests_per_minute,
        tokens_per_minute=tenant.limits.tokens_per_minute,
        wallet=await store.wallet(name),
        active_keys=len(keys) - revoked,
        revoked_keys=revoked,
    )


async def tenant_summaries(store: Store, config: GatewayConfig) -> list[TenantSummary]:
    """Every declared tenant, by name."""
    return [await tenant_summary(store, config, name) for name in sorted(config.tenants)]


# Keys ---------------------------------------------------------------------------------------


async def create_key(
    store: Store, config: GatewayConfig, tenant: str, fields: KeyFields | None = None
) -> tuple[str, ApiKeyRecord]:
    """The new key (shown once, only its hash is kept) and its record."""
    require_tenant(config, tenant)
    settings = KeySettings()
    if fields is not None:
        settings = settings_of(settings, fields, config.tenants[tenant], config, time.time())
    return await issue_key(store, config, tenant, settings)


async def update_key(
    store: Store, config: GatewayConfig, key_id: str, fields: KeyFields
) -> ApiKeyRecord:
    """The key with `fields` applied (left out: kept; null: removed). KeyNotFound when there
    is no such key (or its tenant left the routing file)."""
    record = await store.key_by_id(key_id) if key_id.startswith("key_") else None
    tenant = config.tenants.get(record.tenant) if record is not None else None
    if record is None or tenant is None:
        raise KeyNotFound(f"No API key has the id {key_id!r}.")
    settings = settings_of(record.settings, fields, tenant, config, time.time())
    updated = await store.update_key(key_id, settings)
    if updated is None:
        raise KeyNotFound(f"No API key has the id {key_id!r}.")
    return updated


async def rotate_key(store: Store, key_id: str, grace_seconds: float) -> tuple[str, ApiKeyRecord]:
    """A new secret, same id (shown once); the old one works for `grace_seconds` more.
    KeyNotFound for no such key, ValidationFailed for a revoked one or a bad grace."""
    if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
        raise invalid("grace_seconds", f"a number of seconds from 0 to {MAX_GRACE_SECONDS}")
    record = await store.key_by_id(key_id) if key_id.startswith("key_") else None
    if record is None:
        raise KeyNotFound(f"No API key has the id {key_id!r}.")
    if record.revoked_at is not None:
        raise invalid("key_id", "the key is revoked")
    rotated = await issuing.rotate_key(store, key_id, record.tenant, grace_seconds)
    if rotated is None:
        raise invalid("key_id", "the key is revoked")
    return rotated


async def list_keys(
    store: Store, config: GatewayConfig, *, tenant: str | None = None, prefix: str | None = None
) -> list[ApiKeyRecord]:
    """A tenant's keys, or every declared tenant's (by tenant, oldest first); with `prefix`,
    only the keys whose displayed prefix or id starts with it."""
    if tenant is not None:
        require_tenant(config, tenant)
    names = [tenant] if tenant is not None else sorted(config.tenants)
    found = []
    for name in names:
        for record in await store.list_keys(name):
            if not prefix or record.prefix.startswith(prefix) or record.key_id.startswith(prefix):
                found.append(record)
    return found


async def revoke_key(store: Store, key: str) -> ApiKeyRecord:
    """Revoke by key id (`key_...`) or by the key itself; the record as revoked (revoking
    twice keeps the first time). KeyNotFound when there is no such key."""
    if key.startswith("key_"):
        record = await store.key_by_id(key)
    else:
        record = await store.get_key(hash_api_key(key), split_tag(key))
    if record is None or not await store.revoke_key(record.key_id):
        raise KeyNotFound(f"No API key has the id {key!r}." if key.startswith("key_") else None)
    revoked = await store.key_by_id(record.key_id)
    if revoked is None:  # deleted in between: nothing is left to refuse
        raise KeyNotFound(f"No API key has the id {record.key_id!r}.")
    return revoked


# Credits ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntryResult:
    entry: LedgerEntry
    created: bool
    """False for a repeat of an entry already there (same id, amount and kind): nothing moved."""


async def add_entry(
    store: Store,
    config: GatewayConfig,
    tenant: str,
    *,
    kind: EntryKind,
    amount: str,
    reason: str,
    entry_id: str | None,
) -> EntryResult:
    """A grant (amount > 0) or an adjustment (amount != 0, either sign), at most once per id.

    Given an id already used for the same amount and kind, the first entry is returned and
    nothing moves (a safe retry); for another amount or kind, EntryIdReused. The id is
    required (a missing one is a ValidationFailed naming `id`). A write the store
    did not confirm may have been applied: OutcomeUnknown, naming the id to retry with."""
    require_tenant(config, tenant)
    try:
        units = parse_credits(amount)
    except ValueError as exc:
        raise invalid("amount", str(exc)) from None
    if units == 0:
        raise invalid("amount", "must not be zero")
    if kind == "grant" and units < 0:
        raise invalid(
            "amount",
            "a grant adds credits; take credits away with an adjustment "
            "('gateway credits adjust', POST /admin/v1/tenants/{tenant}/adjustments)",
        )
    reason = reason.strip()
    if not reason:
        raise invalid("reason", "required: say why the balance moves")
    if len(reason) > _MAX_REASON:
        raise invalid("reason", f"at most {_MAX_REASON} characters")
    if entry_id is None:
        raise invalid(
            "id",
            "required: an id of your own (an invoice number, a ticket), or one made per "
            "operation and kept for its retries, so that a retry never applies it twice",
        )
    _check_entry_id(entry_id)
    existing = await store.ledger_entry(tenant, entry_id)
    if existing is not None:
        _same_or_refuse(existing, entry_id, units, kind)
        return EntryResult(entry=existing, created=False)
    try:
        entry = await store.grant(tenant, units, entry_id=entry_id, reason=reason, kind=kind)
    except StoreUnavailable as exc:
        raise outcome_unknown(kind, entry_id) from exc
    # Another writer may have taken the id between the lookup and the grant: the store then
    # returns its entry, which is either the same (a concurrent retry) or refused here.
    _same_or_refuse(entry, entry_id, units, kind)
    return EntryResult(entry=entry, created=True)


def new_entry_id(kind: EntryKind) -> str:
    """An id for one operation whose caller named none (the CLI): kept for its retries."""
    return f"{'grant' if kind == 'grant' else 'adjust'}:{secrets.token_hex(12)}"


def outcome_unknown(kind: EntryKind, entry_id: str) -> OutcomeUnknown:
    """The answer to a grant or adjustment the store may have applied: retried with the same
    id it applies once (or answers the entry it made); without it, it could apply twice."""
    message = f"retry with the same id {entry_id!r}: it applies at most once"
    return OutcomeUnknown(
        f"The store did not confirm the {kind}; it may have been applied. {message[0].upper()}"
        f"{message[1:]}; a retry without it could apply it twice.",
        details=[ErrorDetail(field="id", message=message)],
    )


def _check_entry_id(entry_id: str) -> None:
    if not entry_id or len(entry_id) > _MAX_ENTRY_ID or not entry_id.isprintable():
        raise invalid("id", f"1 to {_MAX_ENTRY_ID} printable characters")
    if entry_id.startswith(RESERVED_ENTRY_PREFIXES):
        reserved = ", ".join(RESERVED_ENTRY_PREFIXES)
        raise invalid("id", f"ids starting with {reserved} are the gateway's own")


def _same_or_refuse(entry: LedgerEntry, entry_id: str, units: int, kind: EntryKind) -> None:
    if entry.amount_units != units or entry.kind != kind:
        message = (
            f"{entry_id!r} was already used for {format_credits(entry.amount_units)} credits "
            f"({entry.kind}) to {entry.tenant}; use a new id"
        )
        raise EntryIdReused(
            f"The entry id {message}.", details=[ErrorDetail(field="id", message=message)]
        )


# Routing ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RoutingTable:
    config_version: str
    models: list[ModelEntry]
    auto: dict[str, str]
    """Per capability, what `auto` tries: "a -> b" (ordered) or "weighted: a (2), b (1)"."""
    breakers: dict[str, BreakerState]
    """Each upstream's circuit breaker in this process, by provider name."""


def routing_table(config: GatewayConfig, router: Router) -> RoutingTable:
    routing = config.file.routing
    auto: dict[str, str] = {}
    for capability in CAPABILITIES:
        chain = routing.auto.get(capability)  # type: ignore[call-overload]
        policy = routing.policies.get(capability)  # type: ignore[call-overload]
        if chain is not None:
            auto[capability] = " -> ".join(chain)
        elif policy is not None:
            names = [c.model for c in policy.candidates]
            if policy.strategy == "weighted":
                weights = [c.weight or 1 for c in policy.candidates]
                auto[capability] = "weighted: " + ", ".join(
                    f"{name} ({weight})" for name, weight in zip(names, weights, strict=True)
                )
            else:
                auto[capability] = " -> ".join(names)
    return RoutingTable(
        config_version=config.version,
        models=list(config.models.values()),
        auto=auto,
        breakers=router.breaker_states(),
    )
