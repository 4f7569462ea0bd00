"""The HTTP session of a reference fetch, and its resolver that never looks a name up.

Apart from `fetch.py` so that aiohttp (~0.15 s of start-up, most of it the TLS contexts it
builds on import) loads with the first URL reference, not with every gateway that has none.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

import aiohttp
from aiohttp import ClientError, ClientResponse
from aiohttp.abc import AbstractResolver, ResolveResult

__all__ = ["ClientError", "ClientResponse", "PinnedResolver", "ResolveResult", "open_session"]


class PinnedResolver(AbstractResolver):
    """Answers only with addresses vetted for this fetch; never performs a lookup."""

    def __init__(self) -> None:
        self.pins: dict[str, list[ResolveResult]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        pinned = self.pins.get(host)
        if pinned is None:
            raise OSError(f"{host} was not vetted for this fetch")
        return [{**result, "port": port} for result in pinned]

    async def close(self) -> None:
        return None


def open_session(resolver: PinnedResolver, headers: Mapping[str, str]) -> aiohttp.ClientSession:
    """One fetch's session: connects only where `resolver` is pinned, one connection per hop."""
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True)
    return aiohttp.ClientSession(
        connector=connector,
        trust_env=False,  # no proxy from the environment: the vetted address is the peer
        auto_decompress=False,
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=None),  # the caller's deadline covers it all
    )
