"""`[[sim:...]]` directives: how a test asks the simulator for a failure, a delay or a shape.

They are read from the LAST user message only (so an earlier turn cannot keep failing a whole
conversation); anything else in the text is ordinary prompt. An unknown directive or a bad
value is rejected like an invalid request, so a typo in a test fails loudly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)

__all__ = ["NO_DIRECTIVES", "Directives", "failure_for", "parse_directives"]

_PATTERN = re.compile(r"\[\[sim:([a-z_]+)(?:=([^\]]*))?\]\]")
_INT_FIELDS = frozenset({"fail", "fail_after", "delay_ms", "tokens"})


@dataclass(frozen=True, slots=True)
class Directives:
    fail: int | None = None  # an HTTP-like status: which error class to raise
    fail_after: int | None = None  # a stream breaks after this many content chunks
    delay_ms: int = 0  # extra latency before the first token
    tool_call: bool = False  # answer with a tool call
    tokens: int | None = None  # exact answer length (before max_completion_tokens)


NO_DIRECTIVES = Directives()


def parse_directives(messages: object) -> Directives:
    """The directives in the last user message; UpstreamRejectedRequest when one is malformed."""
    text = _last_user_text(messages)
    if "[[sim:" not in text:
        return NO_DIRECTIVES
    values: dict[str, Any] = {}
    for name, raw in _PATTERN.findall(text):
        if name == "tool_call" and not raw:
            values["tool_call"] = True
        elif name in _INT_FIELDS and raw.isdigit():
            values[name] = int(raw)
        else:
            raise UpstreamRejectedRequest(
                f"unknown or malformed simulator directive [[sim:{name}{'=' if raw else ''}{raw}]]",
                upstream_status=400,
            )
    return Directives(**values)


def failure_for(status: int) -> ProviderError:
    """The error a real upstream failing with `status` would produce in an adapter.

    502 and other 5xx -> ProviderError, 503/429/529 -> UpstreamUnavailable, 504 ->
    UpstreamTimeout, other 4xx -> UpstreamRejectedRequest (401/403 -> ProviderError).
    """
    message = f"simulated upstream failure (HTTP {status})"
    if status == 504:
        return UpstreamTimeout(message, upstream_status=status)
    if status in (408, 429, 503, 529):
        return UpstreamUnavailable(message, upstream_status=status)
    if 400 <= status < 500 and status not in (401, 403):
        return UpstreamRejectedRequest(message, upstream_status=status)
    return ProviderError(message, upstream_status=status)


def _last_user_text(messages: object) -> str:
    if type(messages) is not list:
        return ""
    for message in reversed(messages):
        if type(message) is dict and message.get("role") == "user":
            content = message.get("content")
            if type(content) is str:
                return content
            if type(content) is list:
                return " ".join(
                    part["text"]
                    for part in content
                    if type(part) is dict and type(part.get("text")) is str
                )
            return ""
    return ""
