"""`gateway`: serve, run task workers, manage keys and credits, check the routing file.

Operators script these commands: output formats and exit codes are stable (tab-separated
columns keep their order; new ones are only appended). Settings come from the same environment
variables as `serve` (GATEWAY_STORE_URL, GATEWAY_CONFIG, ...). Keys, credits, tenants and usage
follow the admin API's rules (`gateway.admin.service`, `gateway.admin.usage`).
Exit codes: 0 ok, 1 the operation failed (unknown key, store down), 2 bad usage or config
(an unknown tenant, an invalid amount, an entry id reused).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from gateway.app.key_commands import (
    add_key_flags,
    keys_create,
    keys_list,
    keys_rotate,
    keys_update,
)
from gateway.app.settings import Settings, SettingsError
from gateway.billing.money import format_credits
from gateway.client import cli as tasks_cli
from gateway.config.loader import ConfigError, GatewayConfig, load_config
from gateway.errors import EntryIdReused, GatewayError, KeyNotFound
from gateway.logging import configure_logging
from gateway.store import store_from_url
from gateway.store.base import Store

__all__ = ["main"]


def _err(message: str) -> None:
    print(f"gateway: {message}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--host", help="listen address (env GATEWAY_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (env GATEWAY_PORT, default 8080)")
    serve.add_argument(
        "--processes",
        type=int,
        help="processes serving the port (env GATEWAY_PROCESSES, default 1; more need Redis)",
    )

    worker = commands.add_parser("worker", help="run task workers (images, music)")
    worker.add_argument(
        "--concurrency", type=int, help="tasks at once (env GATEWAY_WORKERS, default 4)"
    )

    keys = commands.add_parser("keys", help="API keys").add_subparsers(dest="action", required=True)
    create = keys.add_parser("create", help="issue a key; prints only the key")
    create.add_argument("--tenant", required=True)
    add_key_flags(create)
    update = keys.add_parser("update", help="change a key's limits (none removes one)")
    update.add_argument("key_id")
    add_key_flags(update)
    rotate = keys.add_parser("rotate", help="a new secret for a key; prints only the key")
    rotate.add_argument("key_id")
    rotate.add_argument("--grace", help="seconds the old secret keeps working (default 0)")
    revoke = keys.add_parser("revoke", help="revoke a key by its id (key_...) or the key itself")
    revoke.add_argument("key")
    listing = keys.add_parser(
        "list",
        help="list keys (id, created, revoked, tenant, prefix, name, models, budget, period, "
        "spent, expires_at, rpm, tpm); every tenant's by default",
    )
    listing.add_argument("--tenant")
    listing.add_argument("--prefix", help="only keys whose prefix (gw-...) or id starts with it")

    credits = commands.add_parser("credits", help="wallets").add_subparsers(
        dest="action", required=True
    )
    grant = credits.add_parser("grant", help="add credits to a tenant's wallet")
    grant.add_argument("--tenant", required=True)
    grant.add_argument("--amount", required=True, help='credits, up to four decimals ("250.5")')
    grant.add_argument("--reason", required=True)
    grant.add_argument(
        "--id",
        help="entry id making the grant happen at most once (default: one made for this run, "
        "kept for its retries)",
    )
    adjust = credits.add_parser(
        "adjust", help="correct a tenant's wallet by any amount (negative takes credits away)"
    )
    adjust.add_argument("--tenant", required=True)
    adjust.add_argument("--amount", required=True, help='credits, e.g. "-12.5" or "3"')
    adjust.add_argument("--reason", required=True)
    adjust.add_argument(
        "--id",
        help="entry id making the adjustment happen at most once (default: one made for this "
        "run, kept for its retries)",
    )
    balance = credits.add_parser("balance", help="print a tenant's balance")
    balance.add_argument("--tenant", required=True)

    config = commands.add_parser("config", help="routing file").add_subparsers(
        dest="action", required=True
    )
    check = config.add_parser("check", help="validate the routing file")
    check.add_argument("--config", help="path (default: GATEWAY_CONFIG or config/gateway.toml)")

    admin = commands.add_parser("admin", help="the admin API").add_subparsers(
        dest="action", required=True
    )
    admin.add_parser(
        "token", help="make an admin token: the token on stdout, its hash setting on stderr"
    )
    tenants = commands.add_parser("tenants", help="tenants").add_subparsers(
        dest="action", required=True
    )
    tenants.add_parser("list", help="the routing file's tenants (id, balance, active keys)")
    store = commands.add_parser("store", help="the store").add_subparsers(
        dest="action", required=True
    )
    store.add_parser(
        "migrate",
        help="move a Redis store of the previous key layout to this one (gateways stopped; "
        "idempotent: docs/store.md)",
    )
    callbacks = commands.add_parser("callbacks", help="task callbacks").add_subparsers(
        dest="action", required=True
    )
    secret = callbacks.add_parser(
        "secret",
        help="a new signing secret for a tenant; prints only the secret (the one it replaces "
        "still signs for 24 hours)",
    )
    secret.add_argument("--tenant", required=True)
    redeliver = callbacks.add_parser(
        "redeliver", help="one more attempt of a task's callback, with the same webhook-id"
    )
    redeliver.add_argument("task_id")
    redeliver.add_argument("--tenant", help="the task's tenant (default: found among all)")
    usage = commands.add_parser(
        "usage",
        help="usage and spend per tenant, model and UTC day (tenant, model, day, requests, "
        "tasks, charged, refunded, spend)",
    )
    usage.add_argument("--from", dest="start", help="date or ISO time (default: 30 days ago)")
    usage.add_argument("--to", dest="end", help="date (included) or ISO time (default: now)")
    usage.add_argument("--tenant")
    tasks_cli.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "tasks":  # an HTTP client: no settings, store or routing file
        return tasks_cli.run(args)
    if args.command == "admin":  # needs nothing else, so it works whatever the settings say
        return _admin_token()
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        _err(str(exc))
        return 2
    if getattr(args, "config", None):
        settings = replace(settings, config_path=args.config)
    # One format for every command; a one-shot command's stdout is its result, so its log
    # lines (a store warning, say) go to stderr.
    server = args.command in ("serve", "worker")
    configure_logging(settings.log_level, stream=sys.stdout.buffer if server else sys.stderr.buffer)
    try:
        config = load_config(settings.config_path)
    except ConfigError as exc:
        for problem in exc.problems:  # every problem, one line each
            _err(f"config error: {problem}")
        return 2
    if args.command == "config":
        models, tenants = len(config.models), len(config.tenants)
        print(
            f"{config.path}: ok ({len(config.providers)} providers, {models} models, "
            f"{tenants} tenants), version {config.version}"
        )
        for line in auto_dry_run(config):
            print(line)
        return 0
    if args.command == "serve":
        from gateway.app.serve import serve

        if args.host:
            settings = replace(settings, host=args.host)
        if args.port:
            settings = replace(settings, port=args.port)
        if args.processes is not None:  # its range is checked with the other start-up mistakes
            settings = replace(settings, processes=args.processes)
        return serve(settings, config)
    if args.command == "worker":
        from gateway.app.worker import run_worker

        if args.concurrency is not None:
            if args.concurrency < 1:
                _err("--concurrency must be at least 1")
                return 2
            settings = replace(settings, workers=args.concurrency)
        elif settings.workers < 1:
            settings = replace(settings, workers=4)
        return run_worker(settings, config)
    action: Callable[[Store, GatewayConfig, Any], Awaitable[int]] = _ACTIONS[
        (args.command, getattr(args, "action", ""))
    ]
    return asyncio.run(_with_store(settings, config, action, args))


def _admin_token() -> int:
    from gateway.admin.token import hash_setting, new_admin_token

    token = new_admin_token()
    print(token)
    print(f"GATEWAY_ADMIN_TOKEN_HASH={hash_setting(token)}", file=sys.stderr)
    return 0


def auto_dry_run(config: GatewayConfig) -> list[str]:
    """What `model: auto` picks, per tenant and capability, with every upstream healthy."""
    from gateway.errors import GatewayError
    from gateway.routing.resolver import Router

    router = Router(config, dict.fromkeys(config.providers))
    lines = []
    capabilities = router.auto_capabilities()
    for name, tenant in sorted(config.tenants.items()):
        picks = []
        for capability in capabilities:
            try:
                picks.append(
                    f"{capability} -> {router.resolve('auto', tenant, capability).model.id}"
                )
            except GatewayError:
                picks.append(f"{capability} -> (none: no model of the chain is allowed)")
        lines.append(f"auto for tenant {name}: " + "; ".join(picks))
    return lines


async def _with_store(
    settings: Settings,
    config: GatewayConfig,
    action: Callable[[Store, GatewayConfig, Any], Awaitable[int]],
    args: Any,
) -> int:
    from gateway.errors import StoreUnavailable

    store = store_from_url(settings.resolved_store_url)
    try:
        await store.open()
        return await action(store, config, args)
    except StoreUnavailable as exc:
        _err(f"store unavailable ({settings.resolved_store_url}): {exc}")
        return 1
    except KeyNotFound:
        _err("no such key")
        return 1
    except GatewayError as exc:  # the operator's mistake, said as the API says it
        _refused(exc)
        return 2
    finally:
        await store.close()


def _refused(exc: GatewayError) -> None:
    """One line per problem, naming the option (`--amount: ...`)."""
    if not exc.details:
        _err(exc.message)
    for detail in exc.details:
        if isinstance(exc, EntryIdReused):
            _err(f"--{detail.field} {detail.message}")
        else:
            _err(f"--{detail.field}: {detail.message}")


async def _keys_revoke(store: Store, config: GatewayConfig, args: Any) -> int:
    from gateway.admin.service import revoke_key

    await revoke_key(store, args.key)
    print("revoked")
    return 0


async def _credits_grant(store: Store, config: GatewayConfig, args: Any) -> int:
    return await _ledger_entry(store, config, args, grant=True)


async def _credits_adjust(store: Store, config: GatewayConfig, args: Any) -> int:
    return await _ledger_entry(store, config, args, grant=False)


_ENTRY_RETRY_PAUSES = (0.5, 1.0)
"""Pauses before the CLI's own retries of a grant or adjustment whose outcome is unknown."""


async def _ledger_entry(store: Store, config: GatewayConfig, args: Any, *, grant: bool) -> int:
    """A grant (positive) or an adjustment (either sign), once per --id: a repeat of the same
    entry prints the balance it left; the same id with another amount or kind is refused.

    Without --id, one is made for this run and kept for its retries: a write the store did
    not confirm is retried with it (at most once applied), and if it still is not confirmed,
    the message names the id to retry with."""
    from gateway.admin.service import EntryKind, add_entry, new_entry_id
    from gateway.errors import OutcomeUnknown, StoreUnavailable

    kind: EntryKind = "grant" if grant else "adjustment"
    entry_id = args.id if args.id is not None else new_entry_id(kind)
    pauses = iter(_ENTRY_RETRY_PAUSES)
    while True:
        try:
            result = await add_entry(
                store,
                config,
                args.tenant,
                kind=kind,
                amount=args.amount,
                reason=args.reason,
                entry_id=entry_id,
            )
            break
        except (OutcomeUnknown, StoreUnavailable) as exc:
            pause = next(pauses, None)
            if pause is None:
                if isinstance(exc, OutcomeUnknown):
                    _err(f"{exc.message} (--id {entry_id})")
                    return 1
                raise
            _err(f"{exc.message} Retrying with --id {entry_id}.")
            await asyncio.sleep(pause)
    entry = result.entry
    print(format_credits(entry.balance_after_units))
    print(
        f"{entry.id}: {format_credits(entry.amount_units)} credits to {args.tenant}",
        file=sys.stderr,
    )
    return 0


async def _credits_balance(store: Store, config: GatewayConfig, args: Any) -> int:
    from gateway.admin.service import require_tenant

    require_tenant(config, args.tenant)
    wallet = await store.wallet(args.tenant)
    print(format_credits(wallet.balance_units))
    return 0


async def _tenants_list(store: Store, config: GatewayConfig, args: Any) -> int:
    from gateway.admin.service import tenant_summaries

    for summary in await tenant_summaries(store, config):
        balance = format_credits(summary.wallet.balance_units)
        print(f"{summary.name}\t{balance}\t{summary.active_keys}")
    return 0


async def _usage(store: Store, config: GatewayConfig, args: Any) -> int:
    import time

    from gateway.admin.usage import usage_report

    report = await usage_report(
        store, config, start=args.start, end=args.end, tenant=args.tenant, now=time.time()
    )
    for row in report.rows:
        money = (row.charged_units, row.refunded_units, row.spend_units)
        fields = [row.tenant, row.model or "-", row.day, str(row.requests), str(row.tasks)]
        print("\t".join([*fields, *(format_credits(units) for units in money)]))
    return 0


async def _store_migrate(store: Store, config: GatewayConfig, args: Any) -> int:
    """The Redis key layout migration (docs/store.md, "Moving from the previous layout")."""
    from gateway.store.redis import RedisStore
    from gateway.store.redis.migrate import migrate_layout

    if not isinstance(store, RedisStore):
        print("nothing to migrate: a SQLite store migrates itself when opened")
        return 0
    for line in (await migrate_layout(store)).lines():
        print(line)
    return 0


async def _callbacks_secret(store: Store, config: GatewayConfig, args: Any) -> int:
    from gateway.admin.callbacks import rotate_secret

    keys = await rotate_secret(store, config, args.tenant)
    print(keys.secret)
    return 0


async def _callbacks_redeliver(store: Store, config: GatewayConfig, args: Any) -> int:
    from gateway.admin.callbacks import redeliver
    from gateway.errors import NotFound

    try:
        task = await redeliver(store, config, args.task_id, tenant=args.tenant)
    except NotFound:
        _err(f"no such task: {args.task_id}")
        return 1
    callback = task.callback
    status = callback.status if callback else "-"
    print(f"{task.task_id}\t{task.tenant}\t{status}")
    return 0


_ACTIONS: dict[tuple[str, str], Callable[[Store, GatewayConfig, Any], Awaitable[int]]] = {
    ("keys", "create"): keys_create,
    ("keys", "update"): keys_update,
    ("keys", "rotate"): keys_rotate,
    ("keys", "revoke"): _keys_revoke,
    ("keys", "list"): keys_list,
    ("credits", "grant"): _credits_grant,
    ("credits", "adjust"): _credits_adjust,
    ("credits", "balance"): _credits_balance,
    ("tenants", "list"): _tenants_list,
    ("store", "migrate"): _store_migrate,
    ("callbacks", "secret"): _callbacks_secret,
    ("callbacks", "redeliver"): _callbacks_redeliver,
    ("usage", ""): _usage,
}


if __name__ == "__main__":
    raise SystemExit(main())
