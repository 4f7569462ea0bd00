"""`gateway keys create | update | rotate | list`: keys with their governance, from the shell.

The flags fill the admin API's `KeyFields` and go through the same checks
(`gateway.admin.keys`); a bad value exits 2 with one line naming the flag (`--budget: ...`),
never argparse's usage text (every value is taken as text and checked here). On `update`,
`none` removes a limit (`--budget none`, `--expires none`, `--rpm none`, `--models '*'`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from msgspec import UNSET

from gateway.admin import service
from gateway.admin.keys import FLAGS, BudgetFields, KeyFields, budget_state
from gateway.billing.money import format_credits
from gateway.config.loader import GatewayConfig
from gateway.errors import ErrorDetail, ValidationFailed
from gateway.schemas.times import iso
from gateway.store.base import ApiKeyRecord, Store

__all__ = ["add_key_flags", "keys_create", "keys_list", "keys_rotate", "keys_update"]

_NONE = "none"


def add_key_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", help="a label, 1 to 64 printable characters")
    parser.add_argument("--models", help="the models it may use, comma-separated ('*': all)")
    parser.add_argument("--budget", help="credits per period (with --period), or none")
    parser.add_argument("--period", help="day, week, month (calendar, UTC) or total")
    parser.add_argument("--expires", help="an ISO 8601 time in the future, or none")
    parser.add_argument("--rpm", help="requests per minute (at most the tenant's), or none")
    parser.add_argument("--tpm", help="tokens per minute (at most the tenant's), or none")


class _Refused(Exception):
    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"{flag}: {message}")


def _fields(args: Any) -> KeyFields:
    """The flags given, as KeyFields (a flag not given: UNSET; `none`: null)."""
    values: dict[str, Any] = {}
    if args.name is not None:
        values["name"] = None if args.name == _NONE else args.name
    if args.models is not None:
        models = [m.strip() for m in args.models.split(",") if m.strip()]
        values["models"] = None if args.models == _NONE else models
    if args.budget is not None or args.period is not None:
        if args.budget == _NONE:
            values["budget"] = None
        elif args.budget is None:
            raise _Refused("--budget", "required with --period")
        elif args.period is None:
            raise _Refused("--period", "required with --budget (day, week, month or total)")
        else:
            values["budget"] = BudgetFields(credits=args.budget, period=args.period)
    if args.expires is not None:
        values["expires_at"] = None if args.expires == _NONE else args.expires
    for flag, field in (("rpm", "requests_per_minute"), ("tpm", "tokens_per_minute")):
        value = getattr(args, flag)
        if value is None:
            continue
        if value == _NONE:
            values[field] = None
        elif not (value.isascii() and value.isdigit()):
            raise _Refused(f"--{flag}", "a whole number of at least 1, or none")
        else:
            values[field] = int(value)
    return KeyFields(**values)


def _refuse(exc: ValidationFailed | _Refused) -> int:
    if isinstance(exc, _Refused):
        print(f"error: {exc}", file=sys.stderr)
        return 2
    details = exc.details or [ErrorDetail(field="", message=exc.message)]
    for detail in details:
        flag = FLAGS.get(detail.field, f"--{detail.field}")
        print(f"error: {flag}: {detail.message}", file=sys.stderr)
    return 2


async def keys_create(store: Store, config: GatewayConfig, args: Any) -> int:
    try:
        fields = _fields(args)
        key, record = await service.create_key(store, config, args.tenant, fields)
    except (ValidationFailed, _Refused) as exc:
        return _refuse(exc)
    print(key)
    print(f"created {record.key_id} for tenant {record.tenant}", file=sys.stderr)
    return 0


async def keys_update(store: Store, config: GatewayConfig, args: Any) -> int:
    try:
        fields = _fields(args)
        if all(getattr(fields, f) is UNSET for f in KeyFields.__struct_fields__):
            raise _Refused("--name", "nothing to change: give at least one flag")
        record = await service.update_key(store, config, args.key_id, fields)
    except (ValidationFailed, _Refused) as exc:
        return _refuse(exc)
    print(f"updated {record.key_id}", file=sys.stderr)
    return 0


async def keys_rotate(store: Store, config: GatewayConfig, args: Any) -> int:
    grace = args.grace or "0"
    try:
        seconds = float(grace)
    except ValueError:
        return _refuse(_Refused("--grace", "a number of seconds"))
    try:
        key, record = await service.rotate_key(store, args.key_id, seconds)
    except ValidationFailed as exc:
        if exc.details and exc.details[0].field == "grace_seconds":
            return _refuse(_Refused("--grace", exc.details[0].message))
        return _refuse(exc)
    print(key)
    print(f"rotated {record.key_id}; the old key works for {seconds:g} s more", file=sys.stderr)
    return 0


async def keys_list(store: Store, config: GatewayConfig, args: Any) -> int:
    now = time.time()
    for record in await service.list_keys(store, config, tenant=args.tenant, prefix=args.prefix):
        print("\t".join(await _row(store, record, now)))
    return 0


async def _row(store: Store, record: ApiKeyRecord, now: float) -> list[str]:
    """Today's columns (id, created, revoked, tenant, prefix), then name, models, budget,
    period, spent, expires_at, rpm, tpm (`-` when unset)."""
    s = record.settings
    budget = await budget_state(store, record, now)

    def shown(value: object) -> str:
        return "-" if value is None or value == "" else str(value)

    return [
        record.key_id,
        iso(record.created_at),
        iso(record.revoked_at) if record.revoked_at else "-",
        record.tenant,
        record.prefix or "-",
        shown(s.name),
        ",".join(s.models) if s.models else "-",
        format_credits(budget.units) if budget else "-",
        budget.period if budget else "-",
        format_credits(budget.spent) if budget else "-",
        iso(s.expires_at) if s.expires_at is not None else "-",
        shown(s.requests_per_minute),
        shown(s.tokens_per_minute),
    ]
