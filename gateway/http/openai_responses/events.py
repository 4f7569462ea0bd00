"""The Responses API's stream framing (`gateway.chat.framing.StreamFramer`): `event: <type>` and
`data: <json>` per event, every event with its `sequence_number` (0, 1, 2, ...), one framer per
stream.

From chat.completion.chunks (every upstream's stream, translated by its adapter):

    the first chunk          response.created, response.in_progress (status in_progress)
    reasoning_content        a reasoning item: output_item.added, content_part.added
                             (reasoning_text), reasoning_text.delta ...; signed thinking
                             blocks go into its `encrypted_content` (`answer.signed_thinking`)
    content, refusal         a message item: output_item.added, content_part.added
                             (output_text or refusal), output_text.delta / refusal.delta ...
    each tool call           a function_call item: output_item.added,
                             function_call_arguments.delta ...; a custom tool's call is a
                             custom_tool_call item whose input (the arguments' `input`
                             string) comes whole as one custom_tool_call_input.delta
    an item ends             (when the next begins, or at the end) its .done events:
                             output_text.done, content_part.done, function_call_arguments
                             .done, and response.output_item.done with the whole item
    the end                  response.completed, or response.incomplete (finish_reason
                             length or content_filter), with the whole response: output and
                             usage with the gateway's credits
    a break after the start  response.failed: the response with `error` {code, message} in
                             OpenAI's codes (rate_limit_exceeded, insufficient_quota,
                             server_error), the items so far marked incomplete

So an item is always added before any delta of it, and closed before the next one opens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgspec

from gateway.errors import GatewayError
from gateway.http.openai_responses.answer import (
    call_item,
    custom_input,
    message_item,
    reasoning_item,
    response_id,
    response_object,
    responses_usage,
    signed_thinking,
    status_of,
    text_part,
)
from gateway.http.openai_responses.request import ToolNames
from gateway.http.openai_sse import SSE_CONTENT_TYPE
from gateway.ids import new_completion_id

__all__ = ["ResponseEventFramer", "failure_code"]

_encode = msgspec.json.Encoder().encode
_FAILURE_CODES = {
    "rate_limited": "rate_limit_exceeded",
    "insufficient_credits": "insufficient_quota",
    "invalid_request": "invalid_prompt",
}


def failure_code(error: GatewayError) -> str:
    """OpenAI's `response.error.code` for a gateway error (server_error unless named)."""
    return _FAILURE_CODES.get(error.code, "server_error")


class _Item:
    """The output item open now: its index in `output` and its text or arguments so far."""

    __slots__ = ("index", "kind", "part", "signed", "text")

    def __init__(self, index: int, kind: str, part: str = "") -> None:
        self.index = index
        self.kind = kind  # reasoning, message, function_call, custom_tool_call
        self.part = part  # the content part's type (output_text, refusal, reasoning_text)
        self.text: list[str] = []
        self.signed: list[dict[str, Any]] = []  # a reasoning item's signed thinking blocks


class ResponseEventFramer:
    """Chat.completion.chunks -> the Responses API's events (see the module docstring)."""

    content_type = SSE_CONTENT_TYPE
    wants_usage = True

    __slots__ = (
        "_created",
        "_echo",
        "_finish",
        "_id",
        "_model",
        "_names",
        "_on_end",
        "_open",
        "_output",
        "_sequence",
        "_started",
        "_tools",
    )

    def __init__(
        self,
        echo: dict[str, Any],
        names: ToolNames,
        on_end: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._echo = echo
        self._names = names
        self._on_end = on_end  # told the finished response object (to keep it)
        self._sequence = 0
        self._started = False
        self._id = ""
        self._model = ""
        self._created = 0
        self._output: list[dict[str, Any]] = []
        self._open: _Item | None = None
        self._tools: dict[int, _Item] = {}  # tool call index -> its item
        self._finish: object = None

    def _event(self, kind: str, out: list[bytes], **fields: Any) -> None:
        event = {"type": kind, **fields, "sequence_number": self._sequence}
        self._sequence += 1
        out.append(b"event: " + kind.encode() + b"\ndata: " + _encode(event) + b"\n\n")

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        return response_object(
            self._id,
            self._model,
            self._echo,
            status=status,
            output=self._output,
            created_at=self._created,
            **extra,
        )

    def _start(self, chunk: dict[str, Any], out: list[bytes]) -> None:
        self._started = True
        self._id = response_id(str(chunk.get("id") or new_completion_id()))
        self._model = str(chunk.get("model") or "")
        created = chunk.get("created")
        self._created = created if isinstance(created, int) and created else int(time.time())
        response = self._response("in_progress")
        self._event("response.created", out, response=response)
        self._event("response.in_progress", out, response=response)

    def chunk(self, chunk: dict[str, Any]) -> bytes | None:
        out: list[bytes] = []
        if not self._started:
            self._start(chunk, out)
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                self._text("reasoning", "reasoning_text", reasoning, out)
            signed = delta.get("thinking_blocks")
            if isinstance(signed, list) and signed:
                self._signed(signed, out)
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._text("message", "output_text", content, out)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self._text("message", "refusal", refusal, out)
            for call in delta.get("tool_calls") or ():
                self._tool_call(call, out)
            finish = choice.get("finish_reason")
            if finish:
                self._finish = finish
        return b"".join(out) if out else None

    def _text(self, kind: str, part: str, text: str, out: list[bytes]) -> None:
        item = self._open
        if item is None or item.kind != kind or item.part != part:
            self._close(out, "completed")
            item = self._open_item(kind, part, out)
        item.text.append(text)
        ident = self._output[item.index]["id"]
        at = {"item_id": ident, "output_index": item.index, "content_index": 0}
        if part == "output_text":
            self._event("response.output_text.delta", out, **at, delta=text, logprobs=[])
        elif part == "refusal":
            self._event("response.refusal.delta", out, **at, delta=text)
        else:
            self._event("response.reasoning_text.delta", out, **at, delta=text)

    def _signed(self, blocks: list[Any], out: list[bytes]) -> None:
        """Signed thinking blocks (whole, as an adapter sends them when a block ends) go with
        the open reasoning item, or one of their own (a redacted block has no text)."""
        item = self._open
        if item is None or item.kind != "reasoning":
            self._close(out, "completed")
            item = self._open_item("reasoning", "reasoning_text", out)
        item.signed += [block for block in blocks if isinstance(block, dict)]

    def _open_item(self, kind: str, part: str, out: list[bytes]) -> _Item:
        index = len(self._output)
        if kind == "reasoning":
            added = reasoning_item("", "in_progress")
            added["content"] = []
            empty: dict[str, Any] = {"type": "reasoning_text", "text": ""}
        else:
            added = message_item([], "in_progress")
            empty = text_part("") if part == "output_text" else {"type": part, part: ""}
        self._output.append(added)
        self._event("response.output_item.added", out, output_index=index, item=dict(added))
        at = {"item_id": added["id"], "output_index": index, "content_index": 0}
        self._event("response.content_part.added", out, **at, part=empty)
        item = self._open = _Item(index, kind, part)
        return item

    def _tool_call(self, call: dict[str, Any], out: list[bytes]) -> None:
        position = call.get("index", 0)
        function = call.get("function") or {}
        item = self._tools.get(position)
        if item is None:
            self._close(out, "completed")
            name = str(function.get("name") or "")
            index = len(self._output)
            call_id = str(call.get("id") or "")
            added = call_item(call_id, name, "", self._names, status="in_progress")
            self._output.append(added)
            self._event("response.output_item.added", out, output_index=index, item=dict(added))
            item = self._tools[position] = self._open = _Item(index, added["type"])
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            item.text.append(arguments)
            if item.kind == "function_call" and item is self._open:
                ident = self._output[item.index]["id"]
                self._event(
                    "response.function_call_arguments.delta",
                    out,
                    item_id=ident,
                    output_index=item.index,
                    delta=arguments,
                )

    def _close(self, out: list[bytes], status: str) -> None:
        """The open item's .done events, and the whole item in output_item.done."""
        item = self._open
        if item is None:
            return
        self._open = None
        entry = self._output[item.index]
        text = "".join(item.text)
        at: dict[str, Any] = {"item_id": entry["id"], "output_index": item.index}
        if item.kind == "function_call":
            entry["arguments"] = text
            self._event("response.function_call_arguments.done", out, **at, arguments=text)
        elif item.kind == "custom_tool_call":
            entry["input"] = value = custom_input(text)
            if value:
                self._event("response.custom_tool_call_input.delta", out, **at, delta=value)
            self._event("response.custom_tool_call_input.done", out, **at, input=value)
        else:
            if item.part == "output_text":
                part = text_part(text)
                self._event(
                    "response.output_text.done", out, **at, content_index=0, text=text, logprobs=[]
                )
            elif item.part == "refusal":
                part = {"type": "refusal", "refusal": text}
                self._event("response.refusal.done", out, **at, content_index=0, refusal=text)
            else:
                part = {"type": "reasoning_text", "text": text}
                self._event("response.reasoning_text.done", out, **at, content_index=0, text=text)
            entry["content"] = [part]
            if item.signed:
                entry["encrypted_content"] = signed_thinking(item.signed)
            self._event("response.content_part.done", out, **at, content_index=0, part=part)
        entry["status"] = status
        self._event("response.output_item.done", out, output_index=item.index, item=entry)

    def error(self, error: GatewayError, request_id: str) -> bytes:
        out: list[bytes] = []
        if not self._started:
            self._start({}, out)
        self._close(out, "incomplete")
        failure = {"code": failure_code(error), "message": error.message}
        self._event("response.failed", out, response=self._response("failed", error=failure))
        return b"".join(out)

    def end(self, usage: dict[str, Any] | None) -> bytes:
        out: list[bytes] = []
        if not self._started:
            self._start(usage or {}, out)
        status, incomplete = status_of(self._finish)
        self._close(out, "completed" if status == "completed" else "incomplete")
        counts = responses_usage((usage or {}).get("usage") or {})
        response = self._response(status, usage=counts, incomplete=incomplete)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        if self._on_end is not None:
            self._on_end(response)
        self._event(kind, out, response=response)
        return b"".join(out)
