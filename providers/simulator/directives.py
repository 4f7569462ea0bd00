"""`[[sim:...]]` directives: how a test asks the simulator for a failure, a delay or a shape.

Chat reads them from the user's turn being answered: the last message, system messages after
it aside. An earlier turn's directives never apply again (after a tool result the answer
follows the request, so an agent's loop driven by `[[sim:tool_call]]` ends). Media tasks read
them from the prompt and strip them, so they never reach the pixels or the titles. Anything
else in the text is ordinary prompt. An unknown directive (for that capability) or a bad value
is rejected like an invalid request, so a typo in a test fails loudly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

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
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
# Messages that are no turn of their own: the directives of the user's turn before them apply.
_ASIDE_ROLES = frozenset({"system", "developer"})
_MEDIA_INT_FIELDS = frozenset({"fail", "task_ms"})
_MEDIA_FLAG_FIELDS = frozenset({"stall"})


@dataclass(frozen=True, slots=True)
class Directives:
    fail: int | None = None  # an HTTP-like status: which error class to raise
    fail_after: int | None = None  # a stream breaks after this many content chunks
    delay_ms: int = 0  # extra latency before the first token
    tool_call: bool = False  # answer with a tool call
    tokens: int | None = None  # exact answer length (before max_completion_tokens)
    tool_name: str | None = None  # the function the forced call calls
    tool_input: str | None = None  # the forced call's arguments: a JSON object's text


NO_DIRECTIVES = Directives()


@dataclass(frozen=True, slots=True)
class MediaDirectives:
    fail: int | None = None  # an HTTP-like status: which error class to raise
    images: int | None = None  # return at most this many images (images only)
    stall: bool = False  # never finish; keep checking for cancel
    task_ms: int | None = None  # how long the whole task takes, instead of task_seconds


def parse_directives(messages: object) -> Directives:
    """The directives of the user's turn being answered (none when the conversation ends in
    an assistant message or a tool result); UpstreamRejectedRequest when one is malformed.

    `[[sim:tool_call=NAME]]` forces a call of NAME and `[[sim:tool_input={...}]]` (a JSON
    object without `]`) gives its arguments; either forces a call."""
    text = _turn_text(messages)
    if "[[sim:" not in text:
        return NO_DIRECTIVES
    values: dict[str, Any] = {}
    plain: list[str] = []
    for name, raw in _PATTERN.findall(text):
        if name == "tool_call" and raw:
            if not _TOOL_NAME.fullmatch(raw):
                raise _malformed(name, raw)
            values.update(tool_call=True, tool_name=raw)
        elif name == "tool_input":
            values.update(tool_call=True, tool_input=_json_object(name, raw))
        else:
            plain.append(f"[[sim:{name}{'=' if raw else ''}{raw}]]")
    return Directives(**{**_values(" ".join(plain), _INT_FIELDS, _FLAG_FIELDS), **values})


def _json_object(name: str, raw: str) -> str:
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise _malformed(name, raw) from None
    if type(value) is not dict:
        raise _malformed(name, raw)
    return msgspec.json.encode(value).decode()


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
            raise _malformed(name, raw)
    return values


def _malformed(name: str, raw: str) -> UpstreamRejectedRequest:
    return UpstreamRejectedRequest(
        f"unknown or malformed simulator directive [[sim:{name}{'=' if raw else ''}{raw}]]",
        upstream_status=400,
    )


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


def _turn_text(messages: object) -> str:
    """The text of the last message when it is the user's (system messages after it aside)."""
    if type(messages) is not list:
        return ""
    for message in reversed(messages):
        role = message.get("role") if type(message) is dict else None
        if role in _ASIDE_ROLES:
            continue
        if type(message) is not dict or role != "user":
            return ""  # an assistant's message or a tool result: no user turn to answer
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
