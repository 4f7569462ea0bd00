"""The /admin/v1 operations' OpenAPI descriptions, by method and path.

The admin handlers (`gateway.api.admin`) share one Router and guard; their descriptions are
kept here, beside them rather than in their decorators, and found by path when the document
is built. A new admin route without an entry here fails the build (and its test).
"""

from __future__ import annotations

from typing import Any

from gateway.api.openapi.doc import OperationDoc
from gateway.schemas.admin import (
    AdminCallback,
    AdminKey,
    AdminKeyList,
    AdminTaskList,
    CallbackSecret,
    CreatedKey,
    Entry,
    FailedCallbackList,
    KeyFieldsRequest,
    LedgerEntryRequest,
    NewKeyRequest,
    RotateKeyRequest,
    RoutingView,
    Tenant,
    TenantList,
    UsageView,
)
from gateway.schemas.wallet import LedgerList

__all__ = ["ADMIN_DOCS"]

_BASE = "/admin/v1"


def _or_empty(schema: dict[str, Any]) -> dict[str, Any]:
    """The admin API reads an empty query parameter as an absent one (as forms send them)."""
    return {"anyOf": [schema, {"const": ""}], "description": "Empty is the same as absent."}


_LIMIT: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}
_PAGE: dict[str, Any] = {
    "limit": _or_empty({**_LIMIT, "maximum": 200, "default": 100}),
    "after": {"type": "string", "description": "The `next_after` of the previous page."},
}
_STATUSES = ["queued", "running", "succeeded", "failed", "canceled"]
_TIME = {
    "type": "string",
    "description": "A date (YYYY-MM-DD, a whole UTC day) or an ISO 8601 time (UTC unless it "
    "says otherwise).",
}


def _admin(summary: str, responses: dict[int, Any], **kwargs: Any) -> OperationDoc:
    return OperationDoc(
        summary=summary,
        tag="Admin",
        release="Preview",
        auth="admin",
        rate_limited=False,
        responses=responses,
        **kwargs,
    )


_ENTRY: dict[str, Any] = {
    "body": LedgerEntryRequest,
    "responses": {201: Entry, 200: Entry},
    "errors": (404, 409, 422, 504),
    "request_headers": ("EntryId",),
}

ADMIN_DOCS: dict[tuple[str, str], OperationDoc] = {
    ("GET", f"{_BASE}/tenants"): _admin(
        "List tenants", {200: TenantList}, errors=(422,), query=_PAGE
    ),
    ("GET", f"{_BASE}/tenants/{{tenant}}"): _admin("Get a tenant", {200: Tenant}, errors=(404,)),
    ("GET", f"{_BASE}/keys"): _admin(
        "List API keys",
        {200: AdminKeyList},
        errors=(404, 422),
        query={"tenant": {"type": "string"}, "prefix": {"type": "string"}, **_PAGE},
    ),
    ("POST", f"{_BASE}/keys"): _admin(
        "Create an API key", {201: CreatedKey}, body=NewKeyRequest, errors=(404, 422)
    ),
    ("GET", f"{_BASE}/keys/{{key_id}}"): _admin("Get an API key", {200: AdminKey}, errors=(404,)),
    ("PATCH", f"{_BASE}/keys/{{key_id}}"): _admin(
        "Change an API key's name, models, budget, expiry, limits or metadata (null removes "
        "one; lowering a budget below what was spent stops the key until its period resets)",
        {200: AdminKey},
        body=KeyFieldsRequest,
        errors=(404, 422),
    ),
    ("POST", f"{_BASE}/keys/{{key_id}}/rotate"): _admin(
        "Rotate an API key: the same id, a new secret; the old one works until the grace ends",
        {201: CreatedKey},
        body=RotateKeyRequest,
        errors=(404, 422),
    ),
    ("POST", f"{_BASE}/keys/{{key_id}}/revoke"): _admin(
        "Revoke an API key", {200: AdminKey}, errors=(404,)
    ),
    ("POST", f"{_BASE}/tenants/{{tenant}}/grants"): _admin(
        "Grant credits",
        description="201 with the new entry; 200 with the first one for a retry (same id, "
        "amount and kind). The id (`id` or `Idempotency-Key`) is required; a 504 "
        "`outcome_unknown` may have been applied: retry it with the same id.",
        **_ENTRY,
    ),
    ("POST", f"{_BASE}/tenants/{{tenant}}/adjustments"): _admin(
        "Adjust a balance",
        description="As grants; the amount may be negative.",
        **_ENTRY,
    ),
    ("GET", f"{_BASE}/tenants/{{tenant}}/ledger"): _admin(
        "A tenant's ledger",
        {200: LedgerList},
        errors=(404, 422),
        query={"limit": _or_empty(_LIMIT), "after": {"type": "string"}},
    ),
    ("GET", f"{_BASE}/usage"): _admin(
        "Usage by tenant, model and day",
        {200: UsageView},
        errors=(404, 422),
        query={"from": _TIME, "to": _TIME, "tenant": {"type": "string"}, **_PAGE},
    ),
    ("GET", f"{_BASE}/tasks"): _admin(
        "Recent tasks of every tenant",
        {200: AdminTaskList},
        errors=(404, 422),
        query={
            "tenant": {"type": "string"},
            "status": _or_empty({"enum": _STATUSES}),
            "limit": _or_empty({**_LIMIT, "maximum": 200, "default": 50}),
            "after": _PAGE["after"],
        },
    ),
    ("GET", f"{_BASE}/routing"): _admin("The routing table and breakers", {200: RoutingView}),
    ("POST", f"{_BASE}/tenants/{{tenant}}/callback-secret"): _admin(
        "Rotate a tenant's callback signing secret",
        {201: CallbackSecret},
        errors=(404,),
        description="A new `whsec_` secret; for 24 hours every delivery is signed with it and "
        "with the one it replaced.",
    ),
    ("POST", f"{_BASE}/tasks/{{task_id}}/callback/redeliver"): _admin(
        "Redeliver a task's callback",
        {200: AdminCallback},
        errors=(404, 422),
        query={"tenant": {"type": "string"}},
        description="One more attempt, due now, with the same `webhook-id` (a failure of it "
        "is final); 422 when the task has no callback or has not ended.",
    ),
    ("GET", f"{_BASE}/callbacks/failed"): _admin(
        "Failed task callbacks",
        {200: FailedCallbackList},
        errors=(422,),
        query={"limit": _or_empty({**_LIMIT, "maximum": 200, "default": 50})},
    ),
}
