"""The one status table, reading an error body's message, and Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import msgspec
import pytest
from multidict import CIMultiDict

from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamUnavailable,
)
from providers.status import (
    error_for_response,
    error_for_status,
    message_from_body,
    message_from_error,
    retry_after_seconds,
)

ROWS = [
    (400, UpstreamRejectedRequest),
    (404, UpstreamRejectedRequest),
    (413, UpstreamRejectedRequest),
    (422, UpstreamRejectedRequest),
    (401, ProviderError),
    (403, ProviderError),
    (408, UpstreamUnavailable),
    (429, UpstreamUnavailable),
    (503, UpstreamUnavailable),
    (529, UpstreamUnavailable),
    (409, ProviderError),
    (418, ProviderError),
    (500, ProviderError),
    (502, ProviderError),
    (504, ProviderError),
    (302, ProviderError),
]


@pytest.mark.parametrize(("status", "error"), ROWS)
def test_each_row_of_the_table(status: int, error: type[ProviderError]) -> None:
    found = error_for_status(status, "the upstream's words")
    assert type(found) is error
    assert found.upstream_status == status
    assert "the upstream's words" in found.message
    assert found.retry_after is None
    assert error_for_status(status, "x", 2.5).retry_after == 2.5


def test_messages() -> None:
    assert error_for_status(400, "seed is not supported").message == "seed is not supported"
    assert error_for_status(422, "").message == "the upstream rejected the request (HTTP 422)"
    assert "credentials (HTTP 401)" in error_for_status(401, "bad key").message
    assert error_for_status(500, "boom").message == "upstream answered HTTP 500: boom"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error": {"message": "no such model", "type": "invalid_request_error"}}, "no such model"),
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}, "Busy"),
        ({"error": {"code": 429, "message": "Quota", "status": "RESOURCE_EXHAUSTED"}}, "Quota"),
        ({"error": "plain string error"}, "plain string error"),
        ({"detail": "Not Found"}, "Not Found"),
        ({"message": "flat"}, "flat"),
        ({"error": {"code": 1}, "detail": "fallback key"}, "fallback key"),
        ({"other": 1}, '{"other":1}'),
        (b"  upstream exploded \n", "upstream exploded"),
        (b"", ""),
        (b"\xff\xfe broken utf-8", "\ufffd\ufffd broken utf-8"),
    ],
)
def test_message_from_body(body: object, message: str) -> None:
    raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
    assert message_from_body(raw) == message


def test_long_messages_are_cut() -> None:
    assert len(message_from_body(b"x" * 10_000)) == 500
    assert len(message_from_error({"message": "y" * 10_000})) == 500
    assert message_from_error(None) == message_from_error({"message": 3}) == ""


def test_error_for_response_reads_body_and_headers() -> None:
    body = msgspec.json.encode({"error": {"message": "slow down"}})
    found = error_for_response(429, body, CIMultiDict({"retry-after": "7"}))
    assert type(found) is UpstreamUnavailable
    assert (found.upstream_status, found.retry_after) == (429, 7.0)
    assert found.message == "upstream answered HTTP 429: slow down"
    assert error_for_response(400, b"bad", {}).retry_after is None


NOW = 1_700_000_000.0


def _http_date(timestamp: float) -> str:
    return format_datetime(datetime.fromtimestamp(timestamp, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 2 ", 2.0),
        ("0", 0.0),
        ("1.5", 1.5),
        (_http_date(NOW + 30), 30.0),
        (_http_date(NOW - 30), 0.0),  # already past: retry now
        ("Wed, 21 Oct 2015 07:28:00 -0000", 0.0),
        (None, None),
        ("", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("soon", None),
    ],
)
def test_retry_after_seconds(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, now=lambda: NOW) == seconds
