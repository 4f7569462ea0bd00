"""One attempt of a callback delivery: resolve, check, pin, POST, read a bounded answer.

The host is resolved at each attempt and every address it resolves to is judged
(`urls.CallbackPolicy`); the connection goes only to those addresses (the session's resolver
is pinned, as the reference fetcher's: a DNS answer that changes between check and connect
changes nothing). A refused address fails the delivery for good. Redirects are never followed:
a 3xx is a failed attempt. The connection must be made within `connect_seconds`, the status
line and headers must come within `answer_seconds` of it, and at most `MAX_ANSWER_BYTES` of
the answer's body are read (and none kept).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import ip_address
from typing import TYPE_CHECKING, Literal

from yarl import URL

from gateway.artifacts.fetch import Resolve, system_resolve
from gateway.callbacks.schedule import retry_after_seconds
from gateway.callbacks.urls import CallbackPolicy, literal_address

if TYPE_CHECKING:
    from gateway.artifacts.fetch_session import ResolveResult

__all__ = ["MAX_ANSWER_BYTES", "AttemptResult", "CallbackSender", "Outcome"]

MAX_ANSWER_BYTES = 4096
_USER_AGENT = "generation-gateway/callbacks"

Outcome = Literal["delivered", "retry", "refused", "gone"]
"""delivered: a 2xx; retry: anything else worth another attempt; refused: the address is not
allowed (failed, no retry); gone: a 410 (disabled)."""


@dataclass(frozen=True, slots=True)
class AttemptResult:
    outcome: Outcome
    error: str | None = None
    retry_after: float | None = None


class CallbackSender:
    def __init__(
        self,
        policy: CallbackPolicy,
        *,
        resolve: Resolve | None = None,
        connect_seconds: float = 5.0,
        answer_seconds: float = 10.0,
    ) -> None:
        self.policy = policy
        self._resolve = resolve or system_resolve
        self.connect_seconds = connect_seconds
        self.answer_seconds = answer_seconds

    @property
    def longest_seconds(self) -> float:
        """The most one attempt can take (resolve and connect, answer, body)."""
        return 2 * self.connect_seconds + 2 * self.answer_seconds

    async def send(self, url: str, body: bytes, headers: Mapping[str, str]) -> AttemptResult:
        from gateway.artifacts.fetch_session import ClientError, PinnedResolver, open_session

        parsed = URL(url)
        host, http = parsed.raw_host or "", parsed.scheme == "http"
        try:
            async with asyncio.timeout(self.connect_seconds):
                pins = await self._vet(host, parsed.port or 0, http=http)
        except TimeoutError:
            return AttemptResult("retry", f"resolving {host} timed out")
        except OSError:
            return AttemptResult("retry", f"{host} could not be resolved")
        if pins is None:
            return AttemptResult(
                "refused", f"{host} resolves to an address that callbacks may not reach"
            )
        resolver = PinnedResolver()
        resolver.pins = {host: pins}
        sent = {**headers, "User-Agent": _USER_AGENT, "Content-Type": "application/json"}
        try:
            async with open_session(resolver, {}) as session:
                return await self._post(session, parsed, body, sent)
        except TimeoutError:
            return AttemptResult("retry", f"no answer from {host} in time")
        except (ClientError, OSError) as exc:
            return AttemptResult("retry", f"could not connect to {host}: {type(exc).__name__}")

    async def _post(
        self, session: object, url: URL, body: bytes, headers: Mapping[str, str]
    ) -> AttemptResult:
        import aiohttp

        assert isinstance(session, aiohttp.ClientSession)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.connect_seconds, sock_read=self.answer_seconds
        )
        async with asyncio.timeout(self.connect_seconds + self.answer_seconds):
            response = await session.post(
                url, data=body, headers=headers, allow_redirects=False, timeout=timeout
            )
        async with response:
            status = response.status
            try:  # the answer is not kept: read a little so the receiver is not cut off early
                async with asyncio.timeout(self.answer_seconds):
                    await response.content.read(MAX_ANSWER_BYTES)
            except (TimeoutError, aiohttp.ClientError):
                pass
            if 200 <= status < 300:
                return AttemptResult("delivered")
            if status == 410:
                return AttemptResult("gone", "HTTP 410: the receiver disabled this callback")
            wait = retry_after_seconds(response.headers.get("Retry-After"), time.time())
            if 300 <= status < 400:
                return AttemptResult(
                    "retry", f"HTTP {status}: a redirect, not followed", retry_after=wait
                )
            return AttemptResult("retry", f"HTTP {status}", retry_after=wait)

    async def _vet(self, host: str, port: int, *, http: bool) -> list[ResolveResult] | None:
        """The addresses to connect to, all allowed; None when any is not."""
        literal = literal_address(host)
        ips = (
            [literal]
            if literal is not None
            else [ip_address(a) for a in await self._resolve(host, port)]
        )
        if not ips or not all(self.policy.allows(ip, http=http) for ip in ips):
            return None
        return [
            {
                "hostname": host,
                "host": str(ip),
                "port": port,
                "family": socket.AF_INET if ip.version == 4 else socket.AF_INET6,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            }
            for ip in ips
        ]
