"""Which callback URLs a task create accepts, and which addresses an attempt may connect to.

A callback URL is https; plain http, and any address that is not public (private, loopback,
link-local), only to the networks the routing file allows (`callback_allowed_networks`);
metadata addresses never (`gateway.artifacts.addresses`, the reference fetcher's rule). At
create only the URL's text is judged (scheme, credentials, an IP literal: also the legacy IPv4
spellings `2130706433`, `0x7f.1`, `0177.0.0.1` that resolvers read); a name is judged by the
addresses it resolves to at each attempt.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from ipaddress import IPv4Address, ip_address

from yarl import URL

from gateway.artifacts.addresses import Address, Network, address_allowed, parse_networks
from gateway.errors import ErrorDetail, ValidationFailed

__all__ = ["FIELD", "CallbackPolicy", "check_callback_url", "literal_address"]

FIELD = "callback.url"
MAX_URL = 2048
_LEGACY_V4 = re.compile(r"^[0-9a-fA-FxX.]+$")


@dataclass(frozen=True, slots=True)
class CallbackPolicy:
    allowed_networks: tuple[Network, ...] = ()

    @classmethod
    def of(cls, networks: list[str]) -> CallbackPolicy:
        return cls(allowed_networks=parse_networks(networks))

    def allows(self, ip: Address, *, http: bool) -> bool:
        """An address an attempt may connect to (plain http: only in an allowed network)."""
        allowed = address_allowed(ip, self.allowed_networks)  # (metadata: never)
        if http:
            return allowed and any(
                ip.version == n.version and ip in n for n in self.allowed_networks
            )
        return allowed


def literal_address(host: str) -> Address | None:
    """The address an IP-literal host names (legacy IPv4 spellings included); None for a name."""
    try:
        return ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        pass
    if _LEGACY_V4.match(host):
        try:
            return IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def check_callback_url(url: str, policy: CallbackPolicy) -> URL:
    """The parsed URL, or a 422 naming `callback.url` that says what is wrong with it."""

    def refuse(message: str) -> ValidationFailed:
        return ValidationFailed(
            f"{FIELD}: {message}", details=[ErrorDetail(field=FIELD, message=message)]
        )

    if len(url) > MAX_URL:
        raise refuse(f"must be at most {MAX_URL} characters.")
    try:
        parsed = URL(url)
    except (TypeError, ValueError) as exc:
        raise refuse("is not a valid URL.") from exc
    if parsed.scheme not in ("https", "http"):
        raise refuse("must be an https URL.")
    if parsed.user is not None or parsed.password is not None:
        raise refuse("must not contain credentials.")
    host = parsed.raw_host or ""
    if not host:
        raise refuse("must include a host.")
    http = parsed.scheme == "http"
    if http and not policy.allowed_networks:
        raise refuse("must be an https URL.")
    literal = literal_address(host)
    if literal is not None and not policy.allows(literal, http=http):
        if http:
            raise refuse("plain http is allowed only to the networks the gateway allows.")
        raise refuse("must not point to a private, loopback, link-local or metadata address.")
    return parsed
