"""A replica that stays online but never catches up: it speaks Redis's replication protocol to
a primary (PSYNC, the snapshot, the command stream), and acknowledges, several times a second,
only the offset it started from. The primary counts it as online with no lag, so it is waited
for, and every `WAIT` times out however long the write waits: a replica stuck applying, with
no timing window to hit."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

__all__ = ["stale_replica"]

_ACK_EVERY = 0.2


def _command(*parts: str) -> bytes:
    out = [f"*{len(parts)}\r\n".encode()]
    for part in parts:
        data = part.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def line(self) -> bytes:
        while b"\n" not in self._buffer:
            self._more()
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.rstrip(b"\r")

    def skip(self, count: int) -> None:
        while len(self._buffer) < count:
            self._more()
        self._buffer = self._buffer[count:]

    def _more(self) -> None:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionError("the primary closed the replication link")
        self._buffer += chunk


@contextlib.contextmanager
def stale_replica(port: int, host: str = "127.0.0.1") -> Iterator[None]:
    """Attached to the primary at `host:port` while the block runs, then gone."""
    sock = socket.create_connection((host, port), timeout=30)
    reader = _Reader(sock)
    stop = threading.Event()
    try:
        for parts, expect in (
            (("PING",), b"+PONG"),
            (("REPLCONF", "listening-port", "1"), b"+OK"),
            (("REPLCONF", "capa", "psync2"), b"+OK"),
        ):
            sock.sendall(_command(*parts))
            assert reader.line() == expect
        sock.sendall(_command("PSYNC", "?", "-1"))
        full = reader.line()
        assert full.startswith(b"+FULLRESYNC "), full
        offset = full.split()[2].decode()
        size = reader.line()
        while not size.startswith(b"$"):  # newlines keep the link alive while it snapshots
            size = reader.line()
        reader.skip(int(size[1:]))
        sock.settimeout(None)

        def drain() -> None:  # the command stream, never applied
            with contextlib.suppress(OSError):
                while not stop.is_set() and sock.recv(65536):
                    pass

        def acknowledge() -> None:
            with contextlib.suppress(OSError):
                while not stop.wait(_ACK_EVERY):
                    sock.sendall(_command("REPLCONF", "ACK", offset))

        threads = [threading.Thread(target=f, daemon=True) for f in (drain, acknowledge)]
        sock.sendall(_command("REPLCONF", "ACK", offset))
        for thread in threads:
            thread.start()
        yield
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
