"""Identifiers: a prefix and 128 random bits, never guessable or sequential."""

from __future__ import annotations

import os
import re

__all__ = [
    "accept_request_id",
    "new_artifact_id",
    "new_call_id",
    "new_completion_id",
    "new_key_id",
    "new_message_id",
    "new_request_id",
    "new_task_id",
]

_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class _RandomBytes:
    """os.urandom read 4 KiB at a time: one system call per 256 ids instead of one per id."""

    __slots__ = ("_buffer", "_position")

    def __init__(self) -> None:
        self._buffer = b""
        self._position = 0

    def hex(self, size: int) -> str:
        start = self._position
        if start + size > len(self._buffer):
            self._buffer, start = os.urandom(4096), 0
        self._position = start + size
        return self._buffer[start : start + size].hex()

    def forget(self) -> None:
        self._buffer, self._position = b"", 0


_random = _RandomBytes()
os.register_at_fork(after_in_child=_random.forget)  # a forked child must not reuse our bytes


def new_request_id() -> str:
    return "req_" + _random.hex(16)


def new_completion_id() -> str:
    return "chatcmpl_" + _random.hex(16)


def new_message_id() -> str:
    """An answer of the Messages API (Anthropic's `msg_` form)."""
    return "msg_" + _random.hex(16)


def new_call_id() -> str:
    return "call_" + _random.hex(16)


def new_task_id() -> str:
    return "task_" + _random.hex(16)


def new_artifact_id() -> str:
    return "art_" + _random.hex(16)


def new_key_id() -> str:
    return "key_" + _random.hex(8)


def accept_request_id(value: str | None) -> str:
    """Keep a well-formed client X-Request-Id, else make one."""
    if value and _CLIENT_REQUEST_ID.match(value):
        return value
    return new_request_id()


def new_callback_id() -> str:
    """A task callback's `webhook-id` (the same on every attempt of its delivery)."""
    return "cb_" + _random.hex(16)
