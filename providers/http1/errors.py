"""What the HTTP/1.1 client raises when the transport fails (a timeout is a `TimeoutError`).

TransportError          any failure of the connection or of the answer's bytes
  ConnectFailed         no connection: refused, DNS, unreachable
  TLSFailed             the TLS handshake or the certificate check failed
  Disconnected          closed before a single byte of the answer
  BrokenBody            closed, or a read failed, part way through the answer
  BadAnswer             the bytes are not an HTTP/1.1 answer
"""

from __future__ import annotations

__all__ = [
    "BadAnswer",
    "BrokenBody",
    "ConnectFailed",
    "Disconnected",
    "TLSFailed",
    "TransportError",
]


class TransportError(Exception):
    """The connection or the answer's bytes failed (not an HTTP status: those are answers)."""


class ConnectFailed(TransportError):
    """No connection could be opened."""


class TLSFailed(TransportError):
    """The TLS handshake or the certificate check failed."""


class Disconnected(TransportError):
    """The connection closed before the answer began."""


class BrokenBody(TransportError):
    """The connection closed, or reading failed, part way through the answer."""


class BadAnswer(TransportError):
    """What came back is not a valid HTTP/1.1 answer."""
