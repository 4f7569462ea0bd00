"""Incremental Server-Sent Events parser over the byte chunks a socket hands us.

Streaming adapters feed it whatever `readany()` returned and get back the `data` payloads of
every event completed so far. It is on the hot path of every stream, so the common case (one
`data: {...}` line per event, `\\n\\n` separated) is a few slice operations per chunk; the full
line grammar of the spec (CRLF or CR line ends, `:` comments, multi-line data, `field` without
a colon) is handled on a slower path only when a block needs it.

Only `data` is returned: `event:`, `id:` and `retry:` are dropped because every upstream we
speak (OpenAI, Anthropic, Gemini) repeats the event type inside the JSON payload. The OpenAI
end marker `data: [DONE]` sets `done` and ends parsing: nothing after it is returned.

An event still incomplete past `MAX_EVENT_BYTES` is a ProviderError: an upstream that sends
an event without end (no blank line, ever) must not make the gateway hold it all, and each
read keeps arriving within the per-read timeout, so nothing else would stop it.
"""

from __future__ import annotations

from providers.errors import ProviderError

__all__ = ["DONE", "MAX_EVENT_BYTES", "SSEDecoder"]

DONE = b"[DONE]"
_DATA = b"data: "
_NEXT_DATA = b"\n\ndata: "
MAX_EVENT_BYTES = 16 * 1024 * 1024


class SSEDecoder:
    """Feed bytes in, get complete events' data out; one decoder per stream (it keeps state)."""

    __slots__ = ("_buf", "done")

    def __init__(self) -> None:
        self._buf = b""
        self.done = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of each event completed by `chunk`, in order (an incomplete tail is kept)."""
        if self.done:
            return []
        buf = self._buf + chunk if self._buf else chunk
        tail = b""
        if b"\r" in buf:
            # A trailing CR may be the first half of a CRLF split across chunks: keep it raw.
            if buf[-1:] == b"\r":
                buf, tail = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._buf = buf + tail
            _check_size(self._buf)
            return []
        self._buf = buf[end + 2 :] + tail
        _check_size(self._buf)
        if buf[:6] == _DATA and not tail:
            # Most reads hold only `data: ` lines: split on the block starts, and the slow path
            # only if a block has a line of another kind.
            text = buf[6:end]
            found = text.split(_NEXT_DATA)
            if text.count(b"\n") == 2 * len(found) - 2:  # no line ends but the blocks' own
                if DONE in found:
                    self.done = True
                    self._buf = b""
                    return found[: found.index(DONE)]
                return found
        return self._events(buf[:end].split(b"\n\n"))

    def flush(self) -> list[bytes]:
        """At end of stream: the last event even if its blank line never came (lenient)."""
        if self.done or not self._buf:
            return []
        buf = self._buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        self._buf = b""
        return self._events(buf.split(b"\n\n"))

    def _events(self, blocks: list[bytes]) -> list[bytes]:
        out: list[bytes] = []
        for block in blocks:
            if block[:5] == b"data:" and b"\n" not in block:
                data = block[6:] if block[5:6] == b" " else block[5:]
            else:
                parsed = _parse_block(block)
                if parsed is None:
                    continue
                data = parsed
            if data == DONE:
                self.done = True
                self._buf = b""
                break
            out.append(data)
        return out


def _check_size(pending: bytes) -> None:
    if len(pending) > MAX_EVENT_BYTES:
        raise ProviderError(f"the upstream sent an event over {MAX_EVENT_BYTES} bytes")


def _parse_block(block: bytes) -> bytes | None:
    """The spec's line grammar for one event block; None when the block carries no data."""
    data: list[bytes] | None = None
    for line in block.split(b"\n"):
        if not line or line[0] == 0x3A:  # blank, or a ':' comment
            continue
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:
            field, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if field == b"data":
            if data is None:
                data = [value]
            else:
                data.append(value)
    return None if data is None else b"\n".join(data)
