"""Identifiers: a prefix and 128 random bits, never guessable or sequential."""

from __future__ import annotations

import re
import secrets

__all__ = ["accept_request_id", "new_call_id", "new_completion_id", "new_key_id", "new_request_id"]

_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def new_request_id() -> str:
    return "req_" + secrets.token_hex(16)


def new_completion_id() -> str:
    return "chatcmpl_" + secrets.token_hex(16)


def new_call_id() -> str:
    return "call_" + secrets.token_hex(16)


def new_key_id() -> str:
    return "key_" + secrets.token_hex(8)


def accept_request_id(value: str | None) -> str:
    """Keep a well-formed client X-Request-Id, else make one."""
    if value and _CLIENT_REQUEST_ID.match(value):
        return value
    return new_request_id()
