"""Which IP addresses a reference fetch may connect to: globally routable ones only.

Checked on resolved addresses, never on URL text: `2130706433`, `0177.0.0.1` and `0x7f.1` all
resolve to 127.0.0.1, and that is what gets judged. Forms that carry an IPv4 address inside
IPv6 (mapped `::ffff:a.b.c.d`, NAT64, 6to4, Teredo) are judged by the address they carry.
The deny list is explicit rather than only `ipaddress.is_global`, whose answers have changed
between Python releases (and call multicast global); IPv6 must also lie in 2000::/3, the only
block assigned for global unicast. Cloud metadata addresses are refused even when a test
policy allows their network.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network

__all__ = [
    "METADATA_ADDRESSES",
    "Address",
    "Network",
    "address_allowed",
    "is_public_address",
    "parse_networks",
]

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

METADATA_ADDRESSES: frozenset[Address] = frozenset(
    {
        IPv4Address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
        IPv4Address("169.254.170.2"),  # AWS ECS task metadata
        IPv4Address("100.100.100.200"),  # Alibaba Cloud
        IPv4Address("192.0.0.192"),  # Oracle Cloud
        IPv6Address("fd00:ec2::254"),  # AWS over IPv6
    }
)

_DENIED_V4 = tuple(
    IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network", unspecified
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, cloud metadata
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
    )
)
_GLOBAL_UNICAST_V6 = IPv6Network("2000::/3")
_DENIED_V6 = tuple(
    IPv6Network(n)
    for n in (
        "2001::/23",  # IETF protocol assignments, Teredo among them
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
    )
)
_NAT64 = IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = IPv6Network("2002::/16")


def _embedded_v4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 transition form carries, if it is one."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIX_TO_FOUR:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def _public_v4(ip: IPv4Address) -> bool:
    return not any(ip in net for net in _DENIED_V4) and ip.is_global and not ip.is_multicast


def is_public_address(ip: Address) -> bool:
    """True when `ip` is globally routable and no special-purpose range claims it."""
    if isinstance(ip, IPv4Address):
        return _public_v4(ip)
    embedded = _embedded_v4(ip)
    if embedded is not None and not _public_v4(embedded):
        return False
    if ip.ipv4_mapped is not None or ip in _NAT64:
        return True  # these reach the (public) IPv4 host itself
    return (
        ip in _GLOBAL_UNICAST_V6
        and not any(ip in net for net in _DENIED_V6)
        and ip.is_global
        and not ip.is_multicast
    )


def _plain(ip: Address) -> Address:
    """Without an IPv6 zone (`%eth0`, which equality and hashing see) and unmapped."""
    if isinstance(ip, IPv4Address):
        return ip
    if ip.scope_id is not None:
        ip = IPv6Address(int(ip))
    return ip.ipv4_mapped or ip


def address_allowed(ip: Address, allowed_networks: Iterable[Network] = ()) -> bool:
    """The fetch rule: never metadata, then an explicitly allowed network, then public only."""
    plain = _plain(ip)
    if plain in METADATA_ADDRESSES:
        return False
    if any(plain.version == net.version and plain in net for net in allowed_networks):
        return True
    return is_public_address(plain)


def parse_networks(specs: Iterable[str]) -> tuple[Network, ...]:
    """Networks from strings ("127.0.0.1/32"), for settings and tests."""
    return tuple(ip_network(spec) for spec in specs)
