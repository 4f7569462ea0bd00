"""A small pooled HTTP/1.1 client on httptools' parser, behind `providers.upstream`."""

from providers.http1.client import IDEMPOTENT, KEEP_ALIVE, Client, Response, Timeouts, default_tls
from providers.http1.errors import (
    BadAnswer,
    BrokenBody,
    ConnectFailed,
    Disconnected,
    TLSFailed,
    TransportError,
)

__all__ = [
    "IDEMPOTENT",
    "KEEP_ALIVE",
    "BadAnswer",
    "BrokenBody",
    "Client",
    "ConnectFailed",
    "Disconnected",
    "Response",
    "TLSFailed",
    "Timeouts",
    "TransportError",
    "default_tls",
]
