"""The Responses API's state the gateway owns: responses kept per tenant (`store`, OpenAI's
default true) and `previous_response_id` served from them on every upstream.

    previous_response_id     the stored response of this tenant (else a 400
                             previous_response_not_found naming the field, as OpenAI answers):
                             its input items then its output items are the earlier turns,
                             put before the client's input (translated routes: before the
                             translation; passthrough routes: in the body's `input`, the
                             field itself never sent, as `upstream_items` makes them)
    store (not false)        the response object as answered, and its input items (the earlier
                             turns', then the client's, each with an id), kept 30 days;
                             written before the client gets `response.completed` (a whole
                             answer: before its body; a stream: before its last frames)
    store: false             nothing written (a stateless client sends its whole history)

A response that ends in `response.failed` is not kept. A store that fails the write leaves the
answer as it is (it was charged, and it is the client's): logged `response_not_kept`, a later
`previous_response_id` naming it is refused as unknown.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from msgspec import UNSET

from gateway.chat.outcomes import ChatEvents
from gateway.errors import ErrorDetail, GatewayError, PreviousResponseNotFound
from gateway.http.openai_responses.answer import item_id
from gateway.http.openai_responses.items import SIGNED_THINKING
from gateway.logging import get_logger
from gateway.schemas.responses import ResponsesRequest
from gateway.store.base import Store
from gateway.store.responses import RESPONSE_RETENTION_SECONDS, StoredResponse

__all__ = ["ResponseState", "input_items_of", "upstream_items"]

_log = get_logger("gateway.responses")
_decode = msgspec.json.decode
_encode = msgspec.json.Encoder().encode
_ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "reasoning": "rs",
}


def input_items_of(value: object) -> list[dict[str, Any]]:
    """The client's `input` as items with ids, as `input_items` lists them: a string is one
    user message, a message's string content one text part, an item without an id gets one."""
    if isinstance(value, str):
        value = [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        return []
    items: list[dict[str, Any]] = []
    for raw in value:
        if not isinstance(raw, dict):
            continue
        item = dict(raw)
        kind = item.setdefault("type", "message")
        if kind == "message" and isinstance(item.get("content"), str):
            part = "output_text" if item.get("role") == "assistant" else "input_text"
            item["content"] = [{"type": part, "text": item["content"]}]
        if not isinstance(item.get("id"), str) or not item["id"]:
            item["id"] = item_id(_ID_PREFIXES.get(str(kind), "item"))
        items.append(item)
    return items


def upstream_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Earlier turns as a passthrough upstream (OpenAI, Azure OpenAI) is sent them: without
    their ids (which it never stored: the gateway made them, or another account's upstream
    did), and of the reasoning items only those carrying an upstream's encrypted reasoning
    (their id kept, which that content belongs to); the gateway's own signed thinking and
    reasoning that only an id pointed to are dropped."""
    out: list[dict[str, Any]] = []
    for item in items:
        if item.get("type") == "reasoning":
            encrypted = item.get("encrypted_content")
            if isinstance(encrypted, str) and not encrypted.startswith(SIGNED_THINKING):
                out.append(item)
            continue
        out.append({name: value for name, value in item.items() if name != "id"})
    return out


class ResponseState:
    """One request's view of the stored responses (see the module docstring)."""

    __slots__ = ("_store", "_tenant", "earlier", "final", "keep", "previous_id", "sent")

    def __init__(self, store: Store, tenant: str, request: ResponsesRequest) -> None:
        self._store = store
        self._tenant = tenant
        self.keep = request.store is not False
        previous = request.previous_response_id
        self.previous_id = previous if isinstance(previous, str) and previous else None
        self.earlier: list[dict[str, Any]] = []
        """The earlier turns' items (`previous_response_id`'s input, then its output)."""
        self.sent = input_items_of(request.input) if self.keep else []
        self.final: dict[str, Any] | None = None
        """The finished response object of a stream (its framer's `end` gives it)."""

    async def load(self) -> None:
        """The earlier turns, from the stored response `previous_response_id` names."""
        if self.previous_id is None:
            return
        record = await self._store.get_response(self._tenant, self.previous_id)
        if record is None:
            message = f"Previous response with id {self.previous_id!r} not found."
            detail = ErrorDetail(field="previous_response_id", message="not found")
            raise PreviousResponseNotFound(message, details=[detail])
        output = _decode(record.response).get("output")
        self.earlier = [*record.input_items, *(output if isinstance(output, list) else [])]

    def continued(
        self, request: ResponsesRequest, raw: dict[str, Any]
    ) -> tuple[ResponsesRequest, dict[str, Any]]:
        """The request for translation and the body for passthrough, the earlier turns put
        before the client's input (both as they are without `previous_response_id`)."""
        if self.previous_id is None:
            return request, raw
        given = request.input
        own = given if isinstance(given, list) else [] if given is UNSET else [given]
        typed = [*self.earlier, *own]
        own_raw = raw.get("input")
        if isinstance(own_raw, str):
            own_raw = [{"role": "user", "content": own_raw}]
        body = {name: value for name, value in raw.items() if name != "previous_response_id"}
        body["input"] = [*upstream_items(self.earlier), *(own_raw or [])]
        continued = msgspec.structs.replace(
            request, input=_as_items(typed), previous_response_id=UNSET
        )
        return continued, body

    def answered(self, response: dict[str, Any]) -> None:
        """A stream's framer finished the response object (before its last frames go out)."""
        self.final = response

    async def kept(self, body: bytes) -> None:
        """Keep a whole answer (the `response` object's JSON) before it is sent."""
        if self.keep:
            response = _decode(body)
            if isinstance(response, dict):
                await self._put(response, body)

    def keeping(self, events: ChatEvents) -> ChatEvents:
        """`events`, the stream's response kept before its last frames are yielded."""
        return events if not self.keep else _KeepingEvents(events, self)

    async def _put(self, response: dict[str, Any], body: bytes) -> None:
        ident = response.get("id")
        if not isinstance(ident, str) or not ident or response.get("status") == "failed":
            return
        now = time.time()
        record = StoredResponse(
            response_id=ident,
            tenant=self._tenant,
            response=body,
            input_items=[*self.earlier, *self.sent],
            created_at=now,
            expires_at=now + RESPONSE_RETENTION_SECONDS,
        )
        try:
            await self._store.put_response(record)
        except GatewayError as exc:
            _log.warning("response_not_kept", response_id=ident, error=repr(exc))

    async def put_final(self) -> None:
        """Keep the stream's finished response (once), which `answered` was told."""
        final, self.final = self.final, None
        if final is not None:
            await self._put(final, _encode(final))


def _as_items(items: list[Any]) -> list[Any]:
    """A string among the client's input (its whole input) as the user message it stands for."""
    return [{"role": "user", "content": i} if isinstance(i, str) else i for i in items]


class _KeepingEvents:
    """A stream's events (`ChatEvents`) whose response is kept before its last frames."""

    __slots__ = ("_events", "_state")

    def __init__(self, events: ChatEvents, state: ResponseState) -> None:
        self._events = events
        self._state = state

    @property
    def gone(self) -> bool:
        return self._events.gone

    @property
    def ended(self) -> bool:
        return self._events.ended

    async def events(self) -> AsyncIterator[bytes]:
        async for frames in self._events.events():
            if self._state.final is not None:
                await self._state.put_final()
            yield frames

    async def client_left(self) -> None:
        await self._events.client_left()

    async def close(self) -> None:
        await self._events.close()
