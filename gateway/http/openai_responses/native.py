"""The Responses API passed through: a request as its client sent it, for the routes whose
provider speaks the Responses API (`providers.base.ResponsesProvider`: OpenAI, Azure OpenAI).

`ResponsesCall` is the call's `gateway.chat.dialect.NativeRequest`: the body goes to such
routes as it came, but for `model` (the upstream's name) and `previous_response_id` (served by
the gateway: its earlier turns come in `input`), and comes back as the upstream
answered it: the upstream's response id is kept, `model` is the gateway's model id,
`previous_response_id` the client's (the gateway served it: `state.py`), and `usage` gets the
gateway's `credits` and `credits_usd_reference`. A stream's events go out as the upstream sent
them, with the same changes to the `response` they carry; the terminal event
(`response.completed`, `.incomplete` or `.failed`) is held back until the call is settled, so
its usage carries the credits charged. A stream that breaks after it began ends with a
`response.failed` of the gateway's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from gateway.chat.inputs import NO_INPUTS, InputInventory
from gateway.errors import ErrorDetail, GatewayError
from gateway.http.openai_responses.events import failure_code
from gateway.http.openai_sse import SSE_CONTENT_TYPE
from providers.base import ChatCompletion, ChatStream, ResponsesProvider

__all__ = ["NativeResponseFramer", "ResponsesCall", "speaks_responses"]

_encode = msgspec.json.Encoder().encode
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_SPEAKS: dict[type, bool] = {}
"""Provider class -> whether it implements `ResponsesProvider` (a protocol check is slow)."""


def speaks_responses(provider: object) -> ResponsesProvider | None:
    """`provider` as a `ResponsesProvider`, unless its class is none or its upstream was
    configured as one that does not serve the Responses API."""
    kind = type(provider)
    speaks = _SPEAKS.get(kind)
    if speaks is None:
        speaks = _SPEAKS[kind] = isinstance(provider, ResponsesProvider)
    if not speaks or not provider.responses_api:  # type: ignore[attr-defined]
        return None
    return provider  # type: ignore[return-value]


def _frame(event: dict[str, Any]) -> bytes:
    kind = event.get("type")
    name = kind.encode() if isinstance(kind, str) else b"message"
    return b"event: " + name + b"\ndata: " + _encode(event) + b"\n\n"


class _Upstream:
    """A `ResponsesProvider` as the service calls a native route (`NativeUpstream`); notes on
    its call that the answer is the upstream's own."""

    __slots__ = ("_call", "_provider")

    def __init__(self, provider: ResponsesProvider, call: ResponsesCall) -> None:
        self._provider = provider
        self._call = call

    async def complete(self, body: dict[str, Any]) -> ChatCompletion:
        completion = await self._provider.responses(body)
        self._call.passed_through = True
        self._call.upstream_id = completion.body.get("id")
        return completion

    async def stream(self, body: dict[str, Any]) -> ChatStream:
        stream = await self._provider.responses_stream(body)
        self._call.passed_through = True
        return stream


class ResponsesCall:
    """One `/v1/responses` request as its client sent it (see the module docstring)."""

    __slots__ = (
        "_on_end",
        "_previous",
        "inputs",
        "passed_through",
        "problems",
        "request",
        "upstream_id",
    )

    def __init__(
        self,
        raw: dict[str, Any],
        problems: Sequence[ErrorDetail] = (),
        inputs: InputInventory = NO_INPUTS,
        *,
        on_end: Callable[[dict[str, Any]], None] | None = None,
        previous_id: str | None = None,
    ) -> None:
        self.request = raw
        self.problems = problems
        self.inputs = inputs
        """What the body carries that its bytes do not bound (`gateway.chat.inputs`)."""
        self._previous = previous_id
        """The client's `previous_response_id`, which the gateway served (the upstream was
        sent the earlier turns instead): the answer repeats it."""
        self._on_end = on_end
        """Told a stream's finished response object, before its terminal event is framed."""
        self.passed_through = False
        """Whether an upstream that was sent the body as is answered (then no tool was
        dropped)."""
        self.upstream_id: object = None

    def upstream(self, provider: object) -> _Upstream | None:
        speaker = speaks_responses(provider)
        return None if speaker is None else _Upstream(speaker, self)

    def body_for(self, upstream_model: str, max_tokens: int | None = None) -> dict[str, Any]:
        """The client's body for the upstream model, its `max_output_tokens` lowered to
        `max_tokens` (what the wallet-bounded hold pays for) when that is given and smaller."""
        body = dict(self.request)
        body["model"] = upstream_model
        if max_tokens is not None:
            asked = body.get("max_output_tokens")
            if not isinstance(asked, int) or asked > max_tokens:
                body["max_output_tokens"] = max_tokens
        return body

    def framer(self, *, call_id: str, model: str) -> NativeResponseFramer:
        return NativeResponseFramer(model=model, on_end=self._on_end, previous_id=self._previous)

    def completion(self, body: dict[str, Any], credits: dict[str, str]) -> bytes:
        if isinstance(self.upstream_id, str):
            body["id"] = self.upstream_id
        if self._previous is not None:
            body["previous_response_id"] = self._previous
        usage = body.get("usage")
        if isinstance(usage, dict):
            usage.update(credits)
        else:
            body["usage"] = dict(credits)
        return _encode(body)


class NativeResponseFramer:
    """An OpenAI upstream's Responses API events, passed on (see the module docstring)."""

    content_type = SSE_CONTENT_TYPE
    wants_usage = True

    __slots__ = ("_last", "_model", "_on_end", "_previous", "_response", "_sequence")

    def __init__(
        self,
        *,
        model: str,
        on_end: Callable[[dict[str, Any]], None] | None = None,
        previous_id: str | None = None,
    ) -> None:
        self._model = model
        self._previous = previous_id
        self._on_end = on_end
        self._last: dict[str, Any] | None = None  # the terminal event, held back
        self._response: dict[str, Any] = {}  # the latest response object seen
        self._sequence = -1

    def chunk(self, chunk: dict[str, Any]) -> bytes | None:
        number = chunk.get("sequence_number")
        if isinstance(number, int):
            self._sequence = number
        response = chunk.get("response")
        if isinstance(response, dict):
            response["model"] = self._model
            if self._previous is not None:
                response["previous_response_id"] = self._previous
            self._response = response
        if chunk.get("type") in _TERMINAL:
            self._last = chunk
            return None
        return _frame(chunk)

    def error(self, error: GatewayError, request_id: str) -> bytes:
        response = {
            **self._response,
            "status": "failed",
            "error": {"code": failure_code(error), "message": error.message},
        }
        event = {
            "type": "response.failed",
            "response": response,
            "sequence_number": self._sequence + 1,
        }
        return _frame(event)

    def end(self, usage: dict[str, Any] | None) -> bytes:
        last = self._last
        if last is None:  # the upstream ended without a terminal event, yet cleanly
            last = {
                "type": "response.completed",
                "response": {**self._response, "status": "completed"},
                "sequence_number": self._sequence + 1,
            }
        credits = (usage or {}).get("usage") or {}
        response = last.get("response")
        if isinstance(response, dict):
            counts = response.get("usage")
            counts = counts if isinstance(counts, dict) else {}
            for name in ("credits", "credits_usd_reference"):
                if name in credits:
                    counts[name] = credits[name]
            response["usage"] = counts
            if self._on_end is not None and last.get("type") != "response.failed":
                self._on_end(response)
        return _frame(last)
