"""Callback URLs a task create refuses (422 naming `callback.url`) and accepts."""

from __future__ import annotations

import pytest

from gateway.callbacks.urls import CallbackPolicy, check_callback_url
from gateway.errors import ValidationFailed

PUBLIC = CallbackPolicy()
TESTING = CallbackPolicy.of(["127.0.0.2/32"])

REFUSED_LITERALS = [
    "127.0.0.1", "127.1", "0.0.0.0", "0", "2130706433", "0177.0.0.1", "0x7f000001", "0x7f.1",
    "[::1]", "[::]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "10.0.0.1", "012.0.0.1",
    "172.16.0.1", "192.168.0.1", "100.64.0.1", "[fc00::1]", "169.254.169.254", "0xa9fea9fe",
    "2852039166", "100.100.100.200", "[fd00:ec2::254]", "[::ffff:169.254.169.254]",
    "[64:ff9b::a9fe:a9fe]",
]  # fmt: skip


def _refused(url: str, policy: CallbackPolicy = PUBLIC) -> str:
    with pytest.raises(ValidationFailed) as caught:
        check_callback_url(url, policy)
    details = caught.value.details or []
    assert [d.field for d in details] == ["callback.url"]
    return details[0].message


@pytest.mark.parametrize("host", REFUSED_LITERALS)
def test_an_address_that_is_not_public_is_refused_in_every_spelling(host: str) -> None:
    assert "private, loopback" in _refused(f"https://{host}/hook")


def test_schemes_credentials_and_plain_http() -> None:
    assert "https" in _refused("ftp://example.com/hook")
    assert "https" in _refused("file:///etc/passwd")
    assert "https" in _refused("http://example.com/hook")  # no network allowed for http
    assert "credentials" in _refused("https://user:pw@example.com/hook")
    assert "plain http" in _refused("http://127.0.0.1/hook", TESTING)
    assert "plain http" in _refused("http://8.8.8.8/hook", TESTING)  # public, but http
    assert "private, loopback" in _refused("https://169.254.169.254/", CallbackPolicy.of(
        ["169.254.0.0/16"]))  # metadata: never  # fmt: skip


def test_metadata_addresses_are_refused_even_in_an_allowed_network() -> None:
    policy = CallbackPolicy.of(["169.254.0.0/16", "100.100.0.0/16"])
    for url in ("http://169.254.169.254/", "https://169.254.169.254/", "http://100.100.100.200/"):
        assert "private, loopback" in _refused(url, policy) or "plain http" in _refused(url, policy)
    check_callback_url("http://169.254.10.1/hook", policy)  # the rest of the network is allowed


def test_accepted_urls() -> None:
    check_callback_url("https://hooks.example.com/in?x=1", PUBLIC)
    check_callback_url("https://8.8.8.8/hook", PUBLIC)
    check_callback_url("https://localhost/hook", PUBLIC)  # a name: judged when resolved
    check_callback_url("http://127.0.0.2:8080/hook", TESTING)
    check_callback_url("http://receiver.test/hook", TESTING)  # resolved at each attempt
