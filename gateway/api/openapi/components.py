"""The parts of the OpenAPI document every operation shares: the error codes each status
stands for, the response headers and request parameters as components, the security schemes."""

from __future__ import annotations

from typing import Any

__all__ = [
    "ADMIN_CODES",
    "CODES",
    "HEADERS",
    "PARAMETERS",
    "REQUIRED",
    "SECURITY",
    "SECURITY_SCHEMES",
    "header_components",
]

CODES: dict[int, str] = {
    400: "`invalid_request`",
    401: "`invalid_api_key`",
    402: "`insufficient_credits`",
    403: "`admin_disabled`",
    404: "`not_found` (`model_not_found` for a model)",
    408: "`request_timeout`: the request head or body arrived too slowly",
    409: "`idempotency_request_in_progress`",
    413: "`payload_too_large`",
    415: "`unsupported_media_type`",
    416: "`range_not_satisfiable`: the range starts past the end (`Content-Range: bytes */<size>`)",
    422: "`validation_error` (and `idempotency_key_reused`)",
    429: "`rate_limited`: retry after `Retry-After` seconds",
    431: "`request_headers_too_large`",
    500: "`internal_error`",
    502: "`upstream_error`",
    503: "`model_unavailable` or `store_unavailable`",
    504: "`upstream_timeout`",
}

ADMIN_CODES: dict[int, str] = {
    401: "`invalid_admin_token`",
    404: "`tenant_not_found`, `key_not_found`",
    409: "`entry_id_reused`: the id was used for another amount or kind",
}

HEADERS: dict[str, dict[str, Any]] = {
    "X-Request-Id": {
        "description": "The client's X-Request-Id when it is 1 to 128 characters of "
        "[A-Za-z0-9._:-], else one the gateway made (`req_...`); equals `error.request_id`.",
        "schema": {"type": "string"},
    },
    "x-ratelimit-limit-requests": {
        "description": "Requests per minute allowed for this key.",
        "schema": {"type": "integer"},
    },
    "x-ratelimit-remaining-requests": {
        "description": "Requests left in the bucket.",
        "schema": {"type": "integer"},
    },
    "x-ratelimit-reset-requests": {
        "description": 'Time until the request bucket is full ("1.5s", "120ms", "6m0s").',
        "schema": {"type": "string"},
    },
    "x-ratelimit-limit-tokens": {
        "description": "Tokens per minute allowed for this key (chat).",
        "schema": {"type": "integer"},
    },
    "x-ratelimit-remaining-tokens": {
        "description": "Tokens left in the bucket (chat).",
        "schema": {"type": "integer"},
    },
    "x-ratelimit-reset-tokens": {
        "description": "Time until the token bucket is full (chat).",
        "schema": {"type": "string"},
    },
    "Retry-After": {
        "description": "Seconds to wait before retrying (whole seconds, at least 1).",
        "schema": {"type": "integer", "minimum": 1},
    },
    "WWW-Authenticate": {"description": "`Bearer`.", "schema": {"type": "string"}},
    "x-gateway-model": {
        "description": "The model that answered (or the last one tried).",
        "schema": {"type": "string"},
    },
    "x-gateway-route": {
        "description": "How the call was routed: `pinned`, `auto` or the fallbacks taken.",
        "schema": {"type": "string"},
    },
    "x-gateway-max-tokens": {
        "description": "Present when the gateway lowered the output limit below the "
        "request's: the `max_completion_tokens` the model was sent, all the wallet's available "
        "credits pay for (the answer may end with `finish_reason: length`).",
        "schema": {"type": "integer", "minimum": 1},
    },
    "Location": {"description": "The new task's URL.", "schema": {"type": "string"}},
    "Idempotent-Replayed": {
        "description": "Present on a replay of a stored answer (same Idempotency-Key and body).",
        "schema": {"type": "string", "enum": ["true"]},
    },
    "Content-Disposition": {
        "description": "`inline` with the artifact's filename.",
        "schema": {"type": "string"},
    },
    "Cache-Control": {"description": "Caching of the bytes.", "schema": {"type": "string"}},
    "Content-Length": {
        "description": "Bytes in the body (of a GET, also on HEAD).",
        "schema": {"type": "integer", "minimum": 0},
    },
    "Accept-Ranges": {
        "description": "`bytes`: one byte range may be asked with `Range`.",
        "schema": {"type": "string", "enum": ["bytes"]},
    },
    "Content-Range": {
        "description": "The range sent and the whole size (`bytes 0-1023/4096`); on a 416, "
        "`bytes */<size>`.",
        "schema": {"type": "string"},
    },
}

REQUIRED = ".required"

PARAMETERS: dict[str, dict[str, Any]] = {
    "XRequestId": {
        "name": "X-Request-Id",
        "in": "header",
        "required": False,
        "description": "A correlation id of your own, echoed in the response "
        "(kept when 1 to 128 characters of [A-Za-z0-9._:-], else replaced).",
        "schema": {"type": "string"},
    },
    "IdempotencyKey": {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "description": "Makes the create happen once: the same key and body within 24 hours "
        "replay the first answer (`Idempotent-Replayed: true`, nothing charged again); the "
        "same key with another body is 422 `idempotency_key_reused`; one still running, 409.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"},
    },
    "Range": {
        "name": "Range",
        "in": "header",
        "required": False,
        "description": "One byte range (`bytes=0-1023`, `bytes=1024-`, `bytes=-1024`): 206 "
        "with those bytes; past the end, 416. Several ranges or anything else: the whole "
        "content.",
        "schema": {"type": "string"},
    },
    "IfRange": {
        "name": "If-Range",
        "in": "header",
        "required": False,
        "description": "The gateway sends no validators, so none matches: with it, `Range` is "
        "ignored and the whole content sent.",
        "schema": {"type": "string"},
    },
}

SECURITY_SCHEMES = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "A tenant's API key (`gw-...`): `Authorization: Bearer <key>`. "
        "Missing, unknown or revoked: 401 `invalid_api_key`.",
    },
    "adminToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "The admin token (`gwadm-...`), for /admin/v1 only; tenant keys are "
        "refused. No token configured: 403 `admin_disabled`.",
    },
}
SECURITY: dict[str, list[dict[str, list[str]]]] = {
    "api_key": [{"apiKey": []}],
    "api_key_or_link": [{"apiKey": []}, {}],
    "admin": [{"adminToken": []}],
    "none": [],
}


def header_components() -> dict[str, Any]:
    """Each header as an optional component, and as a required one (`<name>.required`): a
    `$ref` cannot carry `required` beside it."""
    components: dict[str, Any] = {}
    for name, header in HEADERS.items():
        components[name] = header
        components[name + REQUIRED] = {**header, "required": True}
    return components
