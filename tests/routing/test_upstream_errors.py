"""Provider failures as the client meets them: status, code, and the upstream's Retry-After."""

from __future__ import annotations

import pytest

from gateway.routing.upstream_errors import as_gateway_error
from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)


@pytest.mark.parametrize(
    ("exc", "status", "header"),
    [
        (UpstreamUnavailable("busy", upstream_status=429, retry_after=2.2), 503, "3"),
        (UpstreamUnavailable("busy", upstream_status=503, retry_after=0.2), 503, "1"),
        (ProviderError("broken", upstream_status=500, retry_after=30), 502, "30"),
        (UpstreamTimeout("slow"), 504, None),
        (ProviderError("broken", upstream_status=500), 502, None),
    ],
)
def test_retry_after_reaches_the_client(
    exc: ProviderError, status: int, header: str | None
) -> None:
    error = as_gateway_error(exc)
    assert error.status_code == status
    assert error.retryable
    assert error.headers.get("Retry-After") == header


def test_a_rejected_request_is_not_told_to_retry() -> None:
    error = as_gateway_error(UpstreamRejectedRequest("bad", upstream_status=400, retry_after=5))
    assert error.status_code == 400
    assert "Retry-After" not in error.headers


def test_a_field_the_adapter_refused_before_sending_is_named() -> None:
    refused = UpstreamRejectedRequest("the URL is not allowed", field="messages[0].content[1]")
    error = as_gateway_error(refused)
    assert (error.status_code, error.code) == (400, "invalid_request")
    assert error.message == "messages[0].content[1]: the URL is not allowed"
    assert [(d.field, d.message) for d in error.details] == [
        ("messages[0].content[1]", "the URL is not allowed")
    ]
