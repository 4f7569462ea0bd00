"""/admin/v1: tenants, keys, credits, usage, tasks and routing, for platform operators.

One guard covers every route (`gateway.admin.token.check_admin_token`): 403 `admin_disabled`
while no admin token is configured, else 401 `invalid_admin_token` unless the request carries
it; tenant keys never get past it. Handlers read the routing file in force
(`resources.config`) per request and call `gateway.admin.service` and `gateway.admin.usage`,
which the `gateway` CLI calls too; this module only reads queries and bodies and renders
(money as four-decimal strings, times as ISO 8601 UTC). Lists come in pages (`limit`,
`after`; `has_more`, `next_after`: `gateway.admin.paging`, `gateway.admin.task_pages`). The
JSON shapes are the admin contract's (docs/operations.md, "Admin API").
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
from litestar import Request, Response, Router, get, patch, post
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from gateway.admin import callbacks as callback_admin
from gateway.admin import service
from gateway.admin.keys import KeyFields, budget_state
from gateway.admin.paging import Page, page_of, row_cursor
from gateway.admin.task_pages import task_page
from gateway.admin.token import check_admin_token
from gateway.admin.usage import usage_report
from gateway.api.admin_views import (
    entry_view,
    failed_callback_view,
    key_view,
    task_view,
    tenant_view,
    usage_view,
)
from gateway.api.query import page_limit
from gateway.api.resources import Resources
from gateway.api.task_view import callback_view
from gateway.api.wallet import ledger_list
from gateway.errors import KeyNotFound, ValidationFailed
from gateway.http.context import context_of
from gateway.http.json_body import decode_json, require_json_content_type
from gateway.schemas.times import iso
from gateway.schemas.wallet import LedgerList
from gateway.store.base import ApiKeyRecord

__all__ = ["ADMIN_PATH", "HANDLERS"]

ADMIN_PATH = "/admin/v1"

_LIST_LIMIT = "100"
_LIST_MAX = 200


class _NewKey(KeyFields, kw_only=True, forbid_unknown_fields=True):
    tenant: str


class _Rotation(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    grace_seconds: float = 0


class _NewEntry(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    amount: str
    reason: str
    id: str | None = None


_new_key = msgspec.json.Decoder(_NewKey)
_key_fields = msgspec.json.Decoder(KeyFields)
_rotation = msgspec.json.Decoder(_Rotation)
_new_entry = msgspec.json.Decoder(_NewEntry)


async def _admin_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    resources: Resources = connection.app.state.resources
    authorization = context_of(connection.scope).authorization
    check_admin_token(authorization, resources.admin_token_hash)


def _query(request: Request[Any, Any, Any], name: str) -> str | None:
    """A query parameter; absent and empty are the same."""
    value = request.query_params.get(name)
    return value or None


def _page_query(request: Request[Any, Any, Any]) -> tuple[int, str | None]:
    """`limit` (1 to 200, 100 by default) and `after` of a paged admin list."""
    limit = page_limit(request.query_params.get("limit") or _LIST_LIMIT, high=_LIST_MAX)
    return limit, _query(request, "after")


def _list(page: Page[Any], data: list[Any]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "has_more": page.has_more,
        "next_after": page.next_after,
    }


async def _body(request: Request[Any, Any, Any], decoder: msgspec.json.Decoder[Any]) -> Any:
    require_json_content_type(context_of(request.scope).content_type)
    return decode_json(await request.body(), decoder, ValidationFailed)


@get("/tenants")
async def list_tenants(request: Request[Any, Any, Any], resources: Resources) -> dict[str, Any]:
    limit, after = _page_query(request)
    page = page_of(sorted(resources.config.tenants), limit=limit, after=after, cursor=str)
    summaries = [
        await service.tenant_summary(resources.store, resources.config, name) for name in page.items
    ]
    return _list(page, [tenant_view(s) for s in summaries])


@get("/tenants/{tenant:str}")
async def get_tenant(resources: Resources, tenant: str) -> dict[str, Any]:
    return tenant_view(await service.tenant_summary(resources.store, resources.config, tenant))


@get("/keys")
async def list_keys(request: Request[Any, Any, Any], resources: Resources) -> dict[str, Any]:
    records = await service.list_keys(
        resources.store,
        resources.config,
        tenant=_query(request, "tenant"),
        prefix=_query(request, "prefix"),
    )
    limit, after = _page_query(request)
    page = page_of(records, limit=limit, after=after, cursor=lambda record: record.key_id)
    return _list(page, [await _key(resources, r) for r in page.items])


async def _key(resources: Resources, record: ApiKeyRecord) -> dict[str, Any]:
    """The Key object, with its budget's spend now."""
    return key_view(record, await budget_state(resources.store, record, time.time()))


@post("/keys", status_code=201)
async def create_key(request: Request[Any, Any, Any], resources: Resources) -> dict[str, Any]:
    body: _NewKey = await _body(request, _new_key)
    fields = KeyFields(**{f: getattr(body, f) for f in KeyFields.__struct_fields__})
    key, record = await service.create_key(resources.store, resources.config, body.tenant, fields)
    return {**await _key(resources, record), "key": key}


@get("/keys/{key_id:str}")
async def get_key(resources: Resources, key_id: str) -> dict[str, Any]:
    record = await resources.store.key_by_id(key_id) if key_id.startswith("key_") else None
    if record is None:
        raise KeyNotFound(f"No API key has the id {key_id!r}.")
    return await _key(resources, record)


@patch("/keys/{key_id:str}")
async def update_key(
    request: Request[Any, Any, Any], resources: Resources, key_id: str
) -> dict[str, Any]:
    fields: KeyFields = await _body(request, _key_fields)
    record = await service.update_key(resources.store, resources.config, key_id, fields)
    resources.auth.forget()  # this process applies it at once; others within their cache time
    return await _key(resources, record)


@post("/keys/{key_id:str}/rotate", status_code=201)
async def rotate_key(
    request: Request[Any, Any, Any], resources: Resources, key_id: str
) -> dict[str, Any]:
    body: _Rotation = await _body(request, _rotation)
    key, record = await service.rotate_key(resources.store, key_id, body.grace_seconds)
    resources.auth.forget()
    return {**await _key(resources, record), "key": key}


@post("/keys/{key_id:str}/revoke", status_code=200)
async def revoke_key(resources: Resources, key_id: str) -> dict[str, Any]:
    if not key_id.startswith("key_"):  # a key itself never travels in a path (access logs)
        raise KeyNotFound("Revoke a key by its id (key_...).")
    record = await service.revoke_key(resources.store, key_id)
    resources.auth.forget()  # this process refuses it at once; others within their cache time
    return await _key(resources, record)


async def _entry(
    request: Request[Any, Any, Any], resources: Resources, tenant: str, kind: service.EntryKind
) -> Response[dict[str, Any]]:
    service.require_tenant(resources.config, tenant)
    body: _NewEntry = await _body(request, _new_entry)
    result = await service.add_entry(
        resources.store,
        resources.config,
        tenant,
        kind=kind,
        amount=body.amount,
        reason=body.reason,
        entry_id=_entry_id(body.id, context_of(request.scope).idempotency_key),
    )
    return Response(entry_view(result.entry), status_code=201 if result.created else 200)


def _entry_id(in_body: str | None, header: str | None) -> str | None:
    """The entry's id: the body's `id` or the `Idempotency-Key` header (the same if both)."""
    if in_body is not None and header is not None and in_body != header:
        raise service.invalid("id", "the body's id and the Idempotency-Key header differ")
    return in_body if in_body is not None else header


@post("/tenants/{tenant:str}/grants")
async def grant(
    request: Request[Any, Any, Any], resources: Resources, tenant: str
) -> Response[dict[str, Any]]:
    return await _entry(request, resources, tenant, "grant")


@post("/tenants/{tenant:str}/adjustments")
async def adjust(
    request: Request[Any, Any, Any], resources: Resources, tenant: str
) -> Response[dict[str, Any]]:
    return await _entry(request, resources, tenant, "adjustment")


@get("/tenants/{tenant:str}/ledger")
async def tenant_ledger(
    request: Request[Any, Any, Any], resources: Resources, tenant: str
) -> LedgerList:
    service.require_tenant(resources.config, tenant)
    limit = request.query_params.get("limit") or "20"
    return await ledger_list(resources.store, tenant, limit, _query(request, "after"))


@get("/usage")
async def usage(request: Request[Any, Any, Any], resources: Resources) -> dict[str, Any]:
    report = await usage_report(
        resources.store,
        resources.config,
        start=_query(request, "from"),
        end=_query(request, "to"),
        tenant=_query(request, "tenant"),
        now=time.time(),
    )
    limit, after = _page_query(request)
    page = page_of(
        report.rows, limit=limit, after=after, cursor=lambda r: row_cursor(r.tenant, r.model, r.day)
    )
    return usage_view(report, page.items, has_more=page.has_more, next_after=page.next_after)


@get("/tasks")
async def tasks(request: Request[Any, Any, Any], resources: Resources) -> dict[str, Any]:
    limit = request.query_params.get("limit") or "50"
    if not (limit.isascii() and limit.isdigit()):  # isdigit alone passes "²", int() refuses it
        raise service.invalid("limit", "an integer from 1 to 200")
    page = await task_page(
        resources.store,
        resources.config,
        tenant=_query(request, "tenant"),
        status=_query(request, "status"),
        limit=int(limit),
        after=_query(request, "after"),
    )
    return _list(page, [task_view(task) for task in page.items])


@post("/tenants/{tenant:str}/callback-secret", status_code=201)
async def rotate_callback_secret(resources: Resources, tenant: str) -> dict[str, Any]:
    keys = await callback_admin.rotate_secret(resources.store, resources.config, tenant)
    return {
        "object": "callback_secret",
        "tenant": keys.tenant,
        "secret": keys.secret,
        "created_at": iso(keys.created_at),
    }


@post("/tasks/{task_id:str}/callback/redeliver", status_code=200)
async def redeliver_callback(
    request: Request[Any, Any, Any], resources: Resources, task_id: str
) -> dict[str, Any]:
    task = await callback_admin.redeliver(
        resources.store, resources.config, task_id, tenant=_query(request, "tenant")
    )
    return {"object": "callback", "task_id": task.task_id, "tenant": task.tenant,
            **callback_view(task)}  # fmt: skip


@get("/callbacks/failed")
async def failed_callbacks(request: Request[Any, Any, Any], resources: Resources) -> dict[str, Any]:
    limit = request.query_params.get("limit") or "50"
    if not (limit.isascii() and limit.isdigit()) or not 1 <= int(limit) <= 200:
        raise service.invalid("limit", "an integer from 1 to 200")
    found = await callback_admin.failed_callbacks(resources.store, limit=int(limit))
    return {"object": "list", "data": [failed_callback_view(task) for task in found]}


@get("/routing")
async def routing(resources: Resources) -> dict[str, Any]:
    table = service.routing_table(resources.config, resources.router)
    return {
        "config_version": table.config_version,
        "models": [
            {
                "id": model.id,
                "capabilities": list(model.capabilities),
                "provider": model.provider,
                "upstream_model": model.upstream_model,
                "release_label": model.release_label,
            }
            for model in table.models
        ],
        "auto": table.auto,
        "breakers": [
            {"provider": provider, "state": state} for provider, state in table.breakers.items()
        ],
    }


HANDLERS = [
    Router(
        path=ADMIN_PATH,
        guards=[_admin_only],
        route_handlers=[
            adjust,
            create_key,
            failed_callbacks,
            get_key,
            redeliver_callback,
            rotate_callback_secret,
            get_tenant,
            grant,
            list_keys,
            list_tenants,
            revoke_key,
            rotate_key,
            routing,
            tasks,
            tenant_ledger,
            update_key,
            usage,
        ],
    )
]
