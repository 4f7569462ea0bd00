"""A fake Amazon Bedrock runtime (`Converse`, `ConverseStream`): a real aiohttp server on
127.0.0.1 and a free port, which checks each request's SigV4 signature.

    async with FakeBedrock(credentials=("AKIDTEST", "secret")) as fake:
        fake.enqueue(Reply(body=answer(text("Hi"))))            # a whole Converse answer
        fake.enqueue(StreamReply(events=events_for("Hi there"))) # an event stream
        fake.enqueue(Reply.error(429, "ThrottlingException", "Too many requests"))
        fake.requests[0].json["messages"]; fake.requests[0].path   # "/model/<id>/converse"

The event stream is AWS's binary one (`encode_message`: prelude, headers, payload, both
CRCs), written in pieces of `StreamReply.piece` bytes so clients meet messages split
anywhere. An event is `(event type, payload dict)`, or `Exception(type, payload)` for an
exception message, or raw bytes. The signature is recomputed from what arrived (method,
path, the signed headers, the body) with botocore's SigV4 and the fake's own copy of the
secret: a request whose body or headers differ from what was signed gets 403
`InvalidSignatureException`, as from AWS. `credentials` is one (access key, secret[, session
token]) or a list of them (rotated ones), `signed_by` lists the access key of each request
that passed. With `credentials=None` nothing is checked; with
`bearer` a Bedrock API key is expected instead. With `echo_headers` a signed call is answered
400 `ValidationException` quoting its `Authorization` (the access key id) and
`X-Amz-Security-Token` headers, as a verbose proxy might.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web
from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]

from tests.fakes.server import Disconnect, Dropped, FakeServer, RecordedRequest, drop, record

__all__ = [
    "DEFAULT_TEXT",
    "Disconnect",
    "EventException",
    "FakeBedrock",
    "Reply",
    "StreamReply",
    "answer",
    "encode_message",
    "event_message",
    "events_for",
    "text",
    "tool_use",
    "usage",
]

DEFAULT_TEXT = "Hello from the fake Bedrock upstream."
_JSON_EVENT = {":content-type": "application/json", ":message-type": "event"}


def encode_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message with string headers, its prelude and message CRCs."""
    block = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        block += bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value))
        block += raw_value
    total = 12 + len(block) + len(payload) + 4
    prelude = struct.pack(">II", total, len(block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + block + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event_message(event_type: str, payload: Mapping[str, Any]) -> bytes:
    return encode_message(
        {":event-type": event_type, **_JSON_EVENT}, msgspec.json.encode(dict(payload))
    )


@dataclass(frozen=True)
class EventException:
    """An exception message inside the stream (`:message-type: exception`)."""

    exception_type: str  # lower camel case, as AWS sends it: "throttlingException"
    message: str

    def encode(self) -> bytes:
        headers = {
            ":exception-type": self.exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        }
        return encode_message(headers, msgspec.json.encode({"message": self.message}))


def text(value: str) -> dict[str, Any]:
    return {"text": value}


def tool_use(tool_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tool_id, "name": name, "input": dict(arguments)}}


def usage(
    input_tokens: int = 12, output_tokens: int = 6, *, cache_read: int = 0, cache_write: int = 0
) -> dict[str, Any]:
    out = {
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens + cache_read + cache_write,
    }
    if cache_read or cache_write:
        out["cacheReadInputTokens"] = cache_read
        out["cacheWriteInputTokens"] = cache_write
    return out


def answer(
    *blocks: dict[str, Any], stop: str = "end_turn", usage_counts: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A whole Converse answer (default: one text block saying `DEFAULT_TEXT`)."""
    return {
        "output": {
            "message": {"role": "assistant", "content": list(blocks) or [text(DEFAULT_TEXT)]}
        },
        "stopReason": stop,
        "usage": usage() if usage_counts is None else usage_counts,
        "metrics": {"latencyMs": 120},
    }


def events_for(
    value: str = DEFAULT_TEXT, *, stop: str = "end_turn", usage_counts: dict[str, Any] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """A text answer as ConverseStream sends it: messageStart, one delta per word, the block's
    stop, messageStop, metadata with the usage."""
    words = value.split(" ")
    events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant"})]
    for position, word in enumerate(words):
        piece = word if position == 0 else " " + word
        events.append(("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}}))
    events.append(("contentBlockStop", {"contentBlockIndex": 0}))
    events.append(("messageStop", {"stopReason": stop}))
    metadata = {
        "usage": usage() if usage_counts is None else usage_counts,
        "metrics": {"latencyMs": 90},
    }
    events.append(("metadata", metadata))
    return events


@dataclass(frozen=True)
class Reply:
    """A whole answer. `body`: None = `answer()`, dict = JSON, bytes = sent as is."""

    status: int = 200
    body: object = None
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def error(
        cls, status: int, exception: str, message: str, *, headers: Mapping[str, str] | None = None
    ) -> Reply:
        """Bedrock's error answer: the exception in `x-amzn-ErrorType`, `{"message"}` body."""
        error_type = f"{exception}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        return cls(
            status=status,
            body={"message": message},
            headers={"x-amzn-ErrorType": error_type, **(headers or {})},
        )


Event = tuple[str, Mapping[str, Any]] | EventException | bytes
Credential = tuple[str, str] | tuple[str, str, str]


@dataclass(frozen=True)
class StreamReply:
    """An event-stream answer. `events`: None = `events_for()`; or a whole recorded body
    (`raw`), written in pieces."""

    events: Sequence[Event] | None = None
    raw: bytes | None = None
    piece: int = 0  # write the body in pieces of this many bytes (0: one write per message)
    delay: float = 0.0
    chunk_delay: float = 0.0
    break_after: int | None = None  # close the connection after this many messages
    stall_after: int | None = None  # go silent after this many messages


class FakeBedrock(FakeServer[RecordedRequest, Reply | StreamReply | Disconnect]):
    """The Bedrock runtime fake (see `FakeServer`); `base_url` has no path. A recorded
    request's `path` is the raw (percent-encoded) path it was sent to."""

    base_path = ""
    thread_name = "fake-bedrock"

    def __init__(
        self,
        *,
        credentials: Credential | list[Credential] | None = None,
        region: str = "us-east-1",
        bearer: str | None = None,
        text: str = DEFAULT_TEXT,
    ) -> None:
        super().__init__()
        if isinstance(credentials, tuple):
            credentials = [credentials]
        self.credentials = {c[0]: c for c in credentials} if credentials is not None else None
        self.signed_by: list[str] = []
        self.region = region
        self.bearer = bearer
        self.text = text
        self.signatures_checked = 0
        self.echo_headers = False

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/model/{model}/{operation}", self._call)

    async def _call(self, request: web.Request) -> web.StreamResponse:
        recorded = await record(request, request.raw_path)
        self.requests.append(recorded)
        refused = self._refuse(request, recorded)
        if refused is not None:
            return refused
        if self.echo_headers:
            quoted = ", ".join(
                f"{name}={request.headers.get(name)}"
                for name in ("Authorization", "X-Amz-Security-Token")
            )
            return _error(400, "ValidationException", f"Malformed request headers: {quoted}")
        operation = request.match_info["operation"]
        if operation not in ("converse", "converse-stream", "invoke"):
            return _error(404, "UnknownOperationException", f"unknown operation {operation}")
        reply = self._script.popleft() if self._script else None
        wants = recorded.json
        if reply is None and self.bill is not None and isinstance(wants, dict):
            counts = usage(*self.bill(wants))
            if operation == "converse-stream":
                reply = StreamReply(events=events_for(self.text, usage_counts=counts))
            else:
                reply = Reply(body=answer(text(self.text), usage_counts=counts))
        if reply is None:
            reply = StreamReply() if operation == "converse-stream" else Reply()
        try:
            if isinstance(reply, StreamReply):
                return await self._stream(request, reply)
            await asyncio.sleep(reply.delay)
            if isinstance(reply, Disconnect):
                drop(request)
            return self._whole(reply, operation)
        except Dropped:
            raise asyncio.CancelledError from None
        except (ConnectionError, asyncio.CancelledError):
            self.disconnects += 1
            raise

    def _refuse(self, request: web.Request, recorded: RecordedRequest) -> web.Response | None:
        """AWS's 403 for a missing or wrong signature (or API key)."""
        authorization = request.headers.get("Authorization", "")
        if self.bearer is not None:
            if authorization != f"Bearer {self.bearer}":
                return _error(403, "AccessDeniedException", "Authentication failed")
            return None
        if self.credentials is None:
            return None
        expected = self._signature(request, recorded, authorization)
        if expected is None or authorization != expected:
            return _error(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            )
        self.signatures_checked += 1
        self.signed_by.append(authorization.split("Credential=", 1)[1].split("/", 1)[0])
        return None

    def _signature(
        self, request: web.Request, recorded: RecordedRequest, authorization: str
    ) -> str | None:
        """The Authorization header botocore makes for what arrived, with the same date and
        signed headers; None when the request is not SigV4-signed at all."""
        date = request.headers.get("X-Amz-Date")
        if not authorization.startswith("AWS4-HMAC-SHA256 ") or date is None:
            return None
        fields = dict(
            part.strip().split("=", 1)
            for part in authorization[len("AWS4-HMAC-SHA256 ") :].split(",")
        )
        signed = fields.get("SignedHeaders", "").split(";")
        headers = {name: request.headers[name] for name in signed if name in request.headers}
        url = f"http://{request.host}{request.raw_path}"
        aws = AWSRequest(method=request.method, url=url, data=recorded.body, headers=headers)
        aws.context["timestamp"] = date
        access_key = fields.get("Credential", "").split("/", 1)[0]
        known = self.credentials.get(access_key) if self.credentials else None
        if known is None:
            return None
        credentials = Credentials(*known)
        auth = SigV4Auth(credentials, "bedrock", self.region)
        canonical = auth.canonical_request(aws)
        signature = auth.signature(auth.string_to_sign(aws, canonical), aws)
        scope = f"{credentials.access_key}/{date[:8]}/{self.region}/bedrock/aws4_request"
        return (
            f"AWS4-HMAC-SHA256 Credential={scope}, "
            f"SignedHeaders={';'.join(signed)}, Signature={signature}"
        )

    def _whole(self, reply: Reply, operation: str = "converse") -> web.Response:
        body = reply.body
        if body is None and operation == "invoke":  # a Titan embedding
            body = {"embedding": [0.6, 0.8], "inputTextTokenCount": 3}
        elif body is None:
            body = answer(text(self.text))
        raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
        return web.Response(
            status=reply.status,
            body=raw,
            headers={"Content-Type": "application/json", **dict(reply.headers)},
        )

    async def _stream(self, request: web.Request, reply: StreamReply) -> web.StreamResponse:
        await asyncio.sleep(reply.delay)
        if reply.raw is not None:
            messages = [reply.raw]
        else:
            events = reply.events if reply.events is not None else events_for(self.text)
            messages = [_encode_event(event) for event in events]
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/vnd.amazon.eventstream"}
        )
        await response.prepare(request)
        for index, message in enumerate(messages):
            if reply.break_after is not None and index >= reply.break_after:
                drop(request)
            if reply.stall_after is not None and index >= reply.stall_after:
                await asyncio.sleep(3600)
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            step = reply.piece or len(message)
            for start in range(0, len(message), step):
                await response.write(message[start : start + step])
        await response.write_eof()
        return response


def _encode_event(event: Event) -> bytes:
    if isinstance(event, bytes):
        return event
    if isinstance(event, EventException):
        return event.encode()
    return event_message(event[0], event[1])


def _error(status: int, exception: str, message: str) -> web.Response:
    return web.Response(
        status=status,
        body=msgspec.json.encode({"message": message}),
        headers={
            "Content-Type": "application/json",
            "x-amzn-ErrorType": f"{exception}:http://internal.amazon.com/coral/com.amazon.bedrock/",
        },
    )
