"""AWS's binary event stream (`application/vnd.amazon.eventstream`), decoded as bytes arrive.

One message on the wire, all integers big-endian:

    total length u32 | headers length u32 | prelude CRC32 (of the 8 bytes before)
    headers: name length u8, name, type u8, value (by type, below)
    payload: total - headers - 16 bytes
    message CRC32 (of everything before it)

Header value types: 0 true, 1 false (no bytes), 2 int8, 3 int16, 4 int32, 5 int64,
6 bytes and 7 string (u16 length, then the bytes), 8 timestamp (int64 ms), 9 uuid (16 bytes).

`EventStreamDecoder.feed(chunk)` takes whatever the socket gave (one byte, or many messages)
and returns the messages it completed; the rest waits in its buffer, never more than one
message. The prelude is checked as soon as its 12 bytes are in, so a corrupted length is
refused at once instead of waiting for bytes that will never come; every message's CRC is
checked before its payload is handed out. A message over `MAX_MESSAGE_BYTES` (AWS caps
them at 16 MiB), a header block that does not parse, or a CRC mismatch is a ProviderError.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from typing import NamedTuple

from providers.errors import ProviderError

__all__ = ["MAX_MESSAGE_BYTES", "EventStreamDecoder", "HeaderValue", "Message"]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_PRELUDE = 12
_MINIMUM = 16  # prelude and message CRC, no headers, no payload
_MAX_HEADERS = 128 * 1024

HeaderValue = bool | int | bytes | str | uuid.UUID

_u32 = struct.Struct(">I")
_prelude = struct.Struct(">III")
_FIXED = {
    2: struct.Struct(">b"),
    3: struct.Struct(">h"),
    4: struct.Struct(">i"),
    5: struct.Struct(">q"),
}


class Message(NamedTuple):
    headers: dict[str, HeaderValue]
    payload: bytes


def _corrupt(what: str) -> ProviderError:
    return ProviderError(f"the upstream's event stream is corrupt: {what}")


class EventStreamDecoder:
    """Feed bytes in, get complete messages out; one decoder per stream (it keeps state)."""

    __slots__ = ("_buffer", "_need")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._need = 0  # the total length of the message being read, once its prelude checked

    @property
    def pending(self) -> int:
        """Bytes held that are not a whole message yet (0 at a clean end of stream)."""
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[Message]:
        """The messages `chunk` completed, in order."""
        buffer = self._buffer
        buffer += chunk
        messages: list[Message] = []
        while True:
            if not self._need:
                if len(buffer) < _PRELUDE:
                    break
                total, headers_length, crc = _prelude.unpack_from(buffer)
                if zlib.crc32(buffer[:8]) != crc:
                    raise _corrupt("the prelude's CRC does not match")
                if total < _MINIMUM or total > MAX_MESSAGE_BYTES:
                    raise _corrupt(f"a message of {total} bytes")
                if headers_length > min(_MAX_HEADERS, total - _MINIMUM):
                    raise _corrupt(f"{headers_length} bytes of headers in {total}")
                self._need = total
            total = self._need
            if len(buffer) < total:
                break
            view = memoryview(buffer)
            try:
                (crc,) = _u32.unpack_from(view, total - 4)
                if zlib.crc32(view[: total - 4]) != crc:
                    raise _corrupt("a message's CRC does not match")
                (headers_length,) = _u32.unpack_from(view, 4)
                end = _PRELUDE + headers_length
                headers = _headers(bytes(view[_PRELUDE:end]))
                payload = bytes(view[end : total - 4])
            finally:
                view.release()
            del buffer[:total]
            self._need = 0
            messages.append(Message(headers, payload))
        return messages


def _headers(block: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    at = 0
    try:
        while at < len(block):
            length = block[at]
            name = block[at + 1 : at + 1 + length].decode()
            at += 1 + length
            kind = block[at]
            at += 1
            value: HeaderValue
            if kind in (0, 1):
                value = kind == 0
            elif kind in _FIXED:
                fixed = _FIXED[kind]
                (value,) = fixed.unpack_from(block, at)
                at += fixed.size
            elif kind in (6, 7):
                size = int.from_bytes(block[at : at + 2], "big")
                raw = block[at + 2 : at + 2 + size]
                if len(raw) != size:
                    raise _corrupt("a header value runs past its block")
                value = raw.decode() if kind == 7 else raw
                at += 2 + size
            elif kind == 8:
                (value,) = _FIXED[5].unpack_from(block, at)
                at += 8
            elif kind == 9:
                if at + 16 > len(block):
                    raise _corrupt("a header value runs past its block")
                value = uuid.UUID(bytes=block[at : at + 16])
                at += 16
            else:
                raise _corrupt(f"header {name!r} has unknown type {kind}")
            if name in headers:
                raise _corrupt(f"header {name!r} appears twice")
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise _corrupt(f"a header does not parse ({exc})") from exc
    return headers
