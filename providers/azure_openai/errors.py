"""Azure OpenAI's own failures, read into `providers.errors` through the shared status table.

    {"error": {"code", "message", "param", "status", "innererror": {"code":
     "ResponsibleAIPolicyViolation", "content_filter_result": {category: {filtered,
     severity}}}}}

A prompt refused by the content filter (400, `code: content_filter`) is UpstreamRejectedRequest
naming the filter and the categories that tripped it ("content_filter: The response was
filtered ... (violence: medium)"), so the client learns why. A deployment that does not
exist (404 `DeploymentNotFound`) is the routing file's fault, not the client's: ProviderError,
which another upstream may still serve. `retry-after-ms` (Azure's, in milliseconds) wins
over `Retry-After`. Everything else is the shared table with Azure's message (or the
`{"statusCode", "message"}` body of its gateway, on a bad key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from providers.errors import ProviderError, UpstreamRejectedRequest
from providers.status import error_for_status, message_from_body, retry_after_seconds

__all__ = ["error_for_azure_response"]

_NOT_THE_CLIENTS = frozenset({"DeploymentNotFound"})


def error_for_azure_response(status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
    """The error for a non-2xx answer as read: its status, body and headers."""
    retry_after = _retry_after(headers)
    error = _error_object(body)
    code = error.get("code") if error is not None else None
    message = message_from_body(body)
    if code == "content_filter" or _inner_code(error) == "ResponsibleAIPolicyViolation":
        tripped = _filtered(error)
        detail = f" ({tripped})" if tripped else ""
        return UpstreamRejectedRequest(
            f"content_filter: {message}{detail}", upstream_status=status, retry_after=retry_after
        )
    if code in _NOT_THE_CLIENTS:
        return ProviderError(
            f"the upstream has no such deployment (HTTP {status}): {message}",
            upstream_status=status,
            retry_after=retry_after,
        )
    if isinstance(code, str) and code and not code.isdigit() and status in (400, 404, 422):
        message = f"{code}: {message}"
    return error_for_status(status, message, retry_after)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    return retry_after_seconds(headers.get("Retry-After"))


def _error_object(body: bytes) -> dict[str, Any] | None:
    try:
        decoded = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    error = decoded.get("error") if isinstance(decoded, dict) else None
    return error if isinstance(error, dict) else None


def _inner_code(error: dict[str, Any] | None) -> object:
    inner = error.get("innererror") if error is not None else None
    return inner.get("code") if isinstance(inner, dict) else None


def _filtered(error: dict[str, Any] | None) -> str:
    """The categories the filter tripped on, with their severity ("violence: medium")."""
    inner = error.get("innererror") if error is not None else None
    results = inner.get("content_filter_result") if isinstance(inner, dict) else None
    if not isinstance(results, dict):
        return ""
    tripped = []
    for category, result in results.items():
        if isinstance(result, dict) and result.get("filtered"):
            severity = result.get("severity")
            tripped.append(f"{category}: {severity}" if isinstance(severity, str) else category)
    return ", ".join(tripped)
