"""The address rule of the fetcher, on every special range it must refuse."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from gateway.artifacts.addresses import address_allowed, is_public_address, parse_networks


@pytest.mark.parametrize(
    "address",
    [
        "0.0.0.0", "10.1.2.3", "100.64.0.1", "100.127.255.254", "127.0.0.1", "127.255.0.9",
        "169.254.169.254", "169.254.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
        "192.0.0.170", "192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9", "224.0.0.1",
        "239.255.255.250", "240.0.0.1", "255.255.255.255",
        "::", "::1", "fe80::1", "fe80::1%eth0", "fc00::1", "fd00:ec2::254", "ff02::1",
        "2001:db8::1", "3fff::1", "100::1", "fec0::1",
        "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
        "64:ff9b::a00:1", "2002:a00:1::1", "2002:7f00:1::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    ],
)  # fmt: skip
def test_refused(address: str) -> None:
    assert not address_allowed(ip_address(address))


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001::200e",
     "::ffff:8.8.8.8", "64:ff9b::808:808"],
)  # fmt: skip
def test_public(address: str) -> None:
    assert address_allowed(ip_address(address))
    assert is_public_address(ip_address(address))


def test_allowed_networks_open_exactly_what_they_name_but_never_metadata() -> None:
    loopback = parse_networks(["127.0.0.1/32"])
    assert address_allowed(ip_address("127.0.0.1"), loopback)
    assert address_allowed(ip_address("::ffff:127.0.0.1"), loopback)  # same host, mapped
    assert not address_allowed(ip_address("127.0.0.2"), loopback)
    assert not address_allowed(ip_address("::1"), loopback)
    link_local = parse_networks(["169.254.0.0/16", "fd00::/8"])
    assert address_allowed(ip_address("169.254.1.1"), link_local)
    assert not address_allowed(ip_address("169.254.169.254"), link_local)
    assert not address_allowed(ip_address("fd00:ec2::254"), link_local)
