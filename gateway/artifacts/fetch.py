"""SSRF-safe ingestion of reference URLs into a `BlobStore`.

A client-supplied URL must never make the gateway reach its own network. So, before any byte
is sent to a host: the scheme is https (http only when the policy allows it, for tests), the
URL carries no credentials, and the host is resolved here and refused if ANY of its addresses
is not publicly routable (`addresses.address_allowed`). The connection then goes to exactly
the addresses that were checked: the session's resolver only hands back these pinned results
and never looks up a name itself, so a DNS answer that changes between check and connect
(rebinding) changes nothing. The URL keeps its host name, so SNI, certificate checks and the
Host header stay those of the name the client gave. Redirects are followed by hand, each
target vetted the same way, at most `max_redirects`.

The body is capped (Content-Length first, then counted while streaming), its first bytes are
sniffed and must be an allowed type (the declared Content-Type is advisory), the whole fetch
has one deadline, and the body streams into the store, never whole in memory. Every refusal is
a 422 naming the caller's field; messages name only the host the client gave, never an
address it resolved to or a redirect target.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from ipaddress import ip_address
from typing import TYPE_CHECKING

from yarl import URL

from gateway.artifacts.addresses import Network, address_allowed
from gateway.artifacts.blobs import HEAD_BYTES, BlobInfo, BlobStore
from gateway.artifacts.errors import invalid_input
from gateway.artifacts.sniff import sniff
from gateway.errors import PayloadTooLarge, ValidationFailed

if TYPE_CHECKING:
    from gateway.artifacts.fetch_session import ClientResponse, ResolveResult

__all__ = ["FetchPolicy", "FetchedBlob", "ReferenceFetcher", "Resolve", "system_resolve"]

Resolve = Callable[[str, int], Awaitable[Sequence[str]]]
"""Host and port to IP address strings (injectable so tests can play DNS)."""

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_READ_CHUNK = 64 * 1024
_HEADERS = {"User-Agent": "generation-gateway/reference-fetch", "Accept-Encoding": "identity"}
"""Identity encoding: the cap counts the bytes stored, and no decompression bomb can hide."""


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """Where a fetch may go. The default is production's: https, public addresses only."""

    allow_http: bool = False
    allowed_networks: tuple[Network, ...] = ()
    """Networks allowed despite not being public (tests: 127.0.0.1/32); never metadata."""
    max_redirects: int = 3


@dataclass(frozen=True, slots=True)
class FetchedBlob:
    info: BlobInfo
    mime_type: str
    """Sniffed from the content, not taken from Content-Type."""


async def system_resolve(host: str, port: int) -> list[str]:
    """The system resolver (getaddrinfo), which also reads decimal, octal and hex IPv4."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _Refuse:
    """Builds this fetch's 422s: every one names the field and at most the user's host."""

    def __init__(self, field: str, host: str) -> None:
        self.field, self.host = field, host

    def __call__(self, message: str) -> ValidationFailed:
        return invalid_input(self.field, message.format(host=self.host))


class ReferenceFetcher:
    """Fetches reference URLs under one `FetchPolicy`; one session per fetch, closed after."""

    def __init__(
        self, policy: FetchPolicy | None = None, *, resolve: Resolve | None = None
    ) -> None:
        self.policy = policy or FetchPolicy()
        self._resolve = resolve or system_resolve

    async def fetch(
        self,
        url: str,
        *,
        field: str,
        store: BlobStore,
        key: str,
        allowed_types: frozenset[str],
        max_bytes: int,
        timeout_seconds: float = 20.0,
    ) -> FetchedBlob:
        """Fetch `url` into `store` under `key`; `ValidationFailed` naming `field` if refused."""
        from gateway.artifacts.fetch_session import ClientError  # aiohttp: see that module

        first = self._parse(url, _Refuse(field, "the host"))
        refuse = _Refuse(field, first.host or "the host")
        try:
            async with asyncio.timeout(timeout_seconds):
                return await self._fetch(first, refuse, store, key, allowed_types, max_bytes)
        except TimeoutError as exc:
            raise refuse(f"{{host}} did not deliver within {timeout_seconds:g} s.") from exc
        except ClientError as exc:
            raise refuse("could not be fetched from {host}.") from exc

    def check(self, url: str, *, field: str) -> None:
        """The checks that need no network (scheme, credentials, host), so a create call can
        refuse such a URL at once; addresses are checked when the URL is fetched."""
        self._parse(url, _Refuse(field, "the host"))

    def _parse(self, url: str | URL, refuse: _Refuse, *, redirected: bool = False) -> URL:
        """Scheme, credentials and host checks; a redirect's problem is told without its URL."""
        try:
            parsed = url if isinstance(url, URL) else URL(url)
        except (TypeError, ValueError) as exc:
            raise refuse("is not a valid URL.") from exc
        schemes = ("https", "http") if self.policy.allow_http else ("https",)
        problem = None
        if parsed.scheme not in schemes:
            problem = "must be an https URL."
        elif parsed.user is not None or parsed.password is not None:
            problem = "must not contain credentials."
        elif not parsed.raw_host:
            problem = "must include a host."
        if problem is not None:
            raise refuse(
                f"redirects to a URL that is refused: it {problem}" if redirected else problem
            )
        return parsed

    async def _vet(self, url: URL, refuse: _Refuse, *, redirected: bool) -> list[ResolveResult]:
        """Resolve the host and check every address; the results are what we connect to."""
        host, port = url.raw_host or "", url.port or 0
        where = "redirects to an address" if redirected else "{host} resolves to an address"
        try:
            ips = [ip_address(ip) for ip in await self._resolve(host, port)]
        except (OSError, ValueError) as exc:
            if redirected:
                raise refuse("redirects to a host that could not be resolved.") from exc
            raise refuse("{host} could not be resolved.") from exc
        if not ips or not all(address_allowed(ip, self.policy.allowed_networks) for ip in ips):
            raise refuse(f"{where} that is not publicly routable.")
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

    async def _fetch(
        self,
        url: URL,
        refuse: _Refuse,
        store: BlobStore,
        key: str,
        allowed_types: frozenset[str],
        max_bytes: int,
    ) -> FetchedBlob:
        from gateway.artifacts.fetch_session import PinnedResolver, open_session

        resolver = PinnedResolver()
        async with open_session(resolver, _HEADERS) as session:
            for hop in range(self.policy.max_redirects + 1):
                resolver.pins = {
                    url.raw_host or "": await self._vet(url, refuse, redirected=hop > 0)
                }
                async with session.get(url, allow_redirects=False) as response:
                    if response.status in _REDIRECTS:
                        url = self._next_hop(url, response, refuse)
                        continue
                    if response.status != 200:
                        raise refuse(f"{{host}} answered HTTP {response.status}.")
                    return await self._store(response, refuse, store, key, allowed_types, max_bytes)
        raise refuse(f"redirected more than {self.policy.max_redirects} times.")

    def _next_hop(self, url: URL, response: ClientResponse, refuse: _Refuse) -> URL:
        location = response.headers.get("Location")
        if not location:
            raise refuse("{host} answered a redirect without a Location.")
        try:
            target = url.join(URL(location))
        except (TypeError, ValueError) as exc:
            raise refuse("redirects to an invalid URL.") from exc
        return self._parse(target, refuse, redirected=True)

    async def _store(
        self,
        response: ClientResponse,
        refuse: _Refuse,
        store: BlobStore,
        key: str,
        allowed_types: frozenset[str],
        max_bytes: int,
    ) -> FetchedBlob:
        too_large = f"is larger than the limit of {max_bytes} bytes."
        if response.content_length is not None and response.content_length > max_bytes:
            raise refuse(too_large)
        head = b""
        while len(head) < HEAD_BYTES:
            piece = await response.content.read(HEAD_BYTES - len(head))
            if not piece:
                break
            head += piece
        mime = _media_type(head)
        if mime is None or mime not in allowed_types:
            raise refuse(f"the content is not one of: {', '.join(sorted(allowed_types))}.")

        async def body() -> AsyncGenerator[bytes, None]:
            yield head
            async for chunk in response.content.iter_chunked(_READ_CHUNK):
                yield chunk

        try:
            async with contextlib.aclosing(body()) as chunks:
                info = await store.write(key, chunks, max_bytes=max_bytes)
        except PayloadTooLarge as exc:
            raise refuse(too_large) from exc
        return FetchedBlob(info=info, mime_type=mime)


def _media_type(head: bytes) -> str | None:
    """`sniff`'s media, or a PDF (which only a caller that allows `application/pdf` takes:
    a chat's document, `ArtifactService.fetch_document`)."""
    return "application/pdf" if head.startswith(b"%PDF-") else sniff(head)
