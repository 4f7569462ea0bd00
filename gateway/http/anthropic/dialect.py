"""The Anthropic Messages dialect, as the chat service takes it (`gateway.chat.dialect`).

`ANTHROPIC_MESSAGES` frames answers that come back as chat completions (from upstreams of
other formats) as Anthropic's messages and events. `MessagesCall` is one request as the client
sent it, for the routes whose provider speaks the Messages API (`providers.base.
MessagesProvider`): the body goes to them as it came, but for `model` (the upstream's name),
with the client's `anthropic-version` and `anthropic-beta` headers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.errors import ErrorDetail
from gateway.http.anthropic.answer import finished_message, message_of
from gateway.http.anthropic.events import MessageEventFramer, NativeEventFramer
from gateway.ids import new_message_id
from providers.base import ChatCompletion, ChatStream, MessagesProvider

__all__ = ["ANTHROPIC_MESSAGES", "AnthropicMessages", "MessagesCall", "MessagesUpstream"]


class AnthropicMessages:
    """The dialect of `POST /v1/messages` (`gateway.chat.dialect.ChatDialect`)."""

    name = "anthropic"
    path = "/v1/messages"
    limit_field = "max_tokens"
    lowers_max_tokens = True  # Claude Code asks 32,000 of every model

    def new_id(self) -> str:
        return new_message_id()

    def framer(self, *, include_usage: bool) -> MessageEventFramer:
        return MessageEventFramer()

    def completion(self, body: dict[str, Any]) -> bytes:
        return message_of(body)


ANTHROPIC_MESSAGES = AnthropicMessages()


class MessagesUpstream:
    """A `MessagesProvider` as the service calls a native route (`NativeUpstream`)."""

    __slots__ = ("_headers", "_provider")

    def __init__(self, provider: MessagesProvider, headers: Mapping[str, str]) -> None:
        self._provider = provider
        self._headers = headers

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        return await self._provider.messages(body, self._headers)

    async def stream(self, body: dict[str, Any]) -> ChatStream:
        return await self._provider.messages_stream(body, self._headers)

    async def count_tokens(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._provider.count_tokens(body, self._headers)


_SPEAKS: dict[type, bool] = {}
"""Provider class -> whether it implements `MessagesProvider` (a protocol check is slow)."""


def speaks_messages(provider: object) -> MessagesProvider | None:
    kind = type(provider)
    speaks = _SPEAKS.get(kind)
    if speaks is None:
        speaks = _SPEAKS[kind] = isinstance(provider, MessagesProvider)
    return provider if speaks else None  # type: ignore[return-value]


class MessagesCall:
    """One `/v1/messages` request (or `count_tokens`) as its client sent it: the
    `gateway.chat.dialect.NativeRequest` of a call, the `gateway.chat.tokens.CountRequest` of
    a count."""

    __slots__ = ("_headers", "dropped", "problems", "request")

    def __init__(
        self,
        raw: dict[str, Any],
        headers: Mapping[str, str],
        problems: Sequence[ErrorDetail] = (),
        *,
        dropped: tuple[str, ...] = (),
    ) -> None:
        self.request = raw
        self._headers = headers
        self.problems = problems
        self.dropped = dropped
        """Fields only Anthropic takes, which a translated call goes without (`TUNING_FIELDS`)."""

    def upstream(self, provider: object) -> MessagesUpstream | None:
        speaker = speaks_messages(provider)
        return None if speaker is None else MessagesUpstream(speaker, self._headers)

    def body_for(self, upstream_model: str, max_tokens: int | None = None) -> dict[str, Any]:
        body = dict(self.request)
        body["model"] = upstream_model
        if max_tokens is not None and body.get("max_tokens", 0) > max_tokens:
            body["max_tokens"] = max_tokens
        return body

    def count_body(self, upstream_model: str) -> dict[str, Any]:
        return self.body_for(upstream_model)

    def framer(self, *, call_id: str, model: str) -> NativeEventFramer:
        return NativeEventFramer(call_id=call_id, model=model)

    def completion(self, body: dict[str, Any], credits: dict[str, str]) -> bytes:
        return finished_message(body, credits)
