"""`[[sim:...]]` directives: how a test asks the simulator for a failure, a delay or a shape.

Chat reads them from the turn being answered only: the last user message, when nothing but
system messages follow it (so an earlier turn cannot keep failing a whole conversation, and a
`tool_call` directive does not call again once the tool's result came back: an agent loop it
drives ends); media tasks read them from the prompt and strip them, so they never reach the
pixels or the titles. Anything else in the text is ordinary prompt. An unknown directive (for
that capability) or a bad value is rejected like an invalid request, so a typo in a test fails
loudly.
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

__all__ = [
    "NO_DIRECTIVES",
    "Directives",
    "MediaDirectives",
    "failure_for",
    "parse_directives",
    "parse_media_directives",
]

_PATTERN = re.compile(r"\[\[sim:([a-z_]+)(?:=([^\]]*))?\]\]")
_INT_FIELDS = frozenset({"fail", "fail_after", "delay_ms", "tokens"})
_FLAG_FIELDS = frozenset({"tool_call"})
_MEDIA_INT_FIELDS = frozenset({"fail", "task_ms"})
_MEDIA_FLAG_FIELDS = frozenset({"stall"})


@dataclass(frozen=True, slots=True)
class Directives:
    fail: int | None = None  # an HTTP-like status: which error class to raise
    fail_after: int | None = None  # a stream breaks after this many content chunks
    delay_ms: int = 0  # extra latency before the first token
    tool_call: bool = False  # answer with a tool call
    tokens: int | None = None  # exact answer length (before max_completion_tokens)


NO_DIRECTIVES = Directives()


@dataclass(frozen=True, slots=True)
class MediaDirectives:
    fail: int | None = None  # an HTTP-like status: which error class to raise
    images: int | None = None  # return at most this many images (images only)
    stall: bool = False  # never finish; keep checking for cancel
    task_ms: int | None = None  # how long the whole task takes, instead of task_seconds


def parse_directives(messages: object) -> Directives:
    """The directives of the turn being answered (see the module docstring);
    UpstreamRejectedRequest when one is malformed."""
    text = _last_user_text(messages)
    if "[[sim:" not in text:
        return NO_DIRECTIVES
    return Directives(**_values(text, _INT_FIELDS, _FLAG_FIELDS))


def parse_media_directives(prompt: str, *, images: bool) -> tuple[MediaDirectives, str]:
    """The directives in a media prompt, and the prompt without them (whitespace collapsed).

    `images` allows `[[sim:images=N]]` (image tasks); UpstreamRejectedRequest when a directive
    is unknown here or malformed."""
    if "[[sim:" not in prompt:
        return MediaDirectives(), " ".join(prompt.split())
    ints = _MEDIA_INT_FIELDS | {"images"} if images else _MEDIA_INT_FIELDS
    values = _values(prompt, ints, _MEDIA_FLAG_FIELDS)
    return MediaDirectives(**values), " ".join(_PATTERN.sub(" ", prompt).split())


def _values(text: str, ints: frozenset[str], flags: frozenset[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, raw in _PATTERN.findall(text):
        if name in flags and not raw:
            values[name] = True
        elif name in ints and raw.isdigit():
            values[name] = int(raw)
        else:
            raise UpstreamRejectedRequest(
                f"unknown or malformed simulator directive [[sim:{name}{'=' if raw else ''}{raw}]]",
                upstream_status=400,
            )
    return values


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
    """The text of the last message when it is the user's (system messages after it aside)."""
    if type(messages) is not list:
        return ""
    for message in reversed(messages):
        if type(message) is not dict:
            continue
        role = message.get("role")
        if role in ("system", "developer"):
            continue
        if role == "user":
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
