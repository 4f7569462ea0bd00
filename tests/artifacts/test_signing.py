"""Signed content URLs, with a clock the tests move instead of sleeping."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from gateway.artifacts.signing import UrlSigner

SECRET = b"k" * 32


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_valid_until_expiry() -> None:
    clock = Clock()
    signer = UrlSigner(SECRET, clock)
    expires, signature = signer.sign("art_1", 300)
    assert expires == 1_800_000_300
    assert "=" not in signature and len(signature) == 43  # 32 bytes, urlsafe, unpadded
    assert signer.verify("art_1", expires, signature)
    clock.now = expires - 1
    assert signer.verify("art_1", expires, signature)
    clock.now = expires
    assert not signer.verify("art_1", expires, signature)
    clock.now = expires + 3600
    assert not signer.verify("art_1", expires, signature)


def test_altered_parts_fail() -> None:
    signer = UrlSigner(SECRET, Clock())
    expires, signature = signer.sign("art_1", 300)
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    assert not signer.verify("art_2", expires, signature)
    assert not signer.verify("art_1", expires + 1, signature)  # a longer life is not granted
    assert not signer.verify("art_1", expires - 1, signature)
    assert not signer.verify("art_1", expires, flipped)
    assert not signer.verify("art_1", expires, signature[:-1])
    assert not signer.verify("art_1", expires, signature + "=")
    assert not signer.verify("art_1", expires, "")
    assert not signer.verify("art_1", expires, "é" * 43)  # no TypeError on non-ASCII
    assert not signer.verify("art_1\n", expires, signature)
    assert not UrlSigner(b"o" * 32, Clock()).verify("art_1", expires, signature)


def test_content_url_round_trips() -> None:
    clock = Clock()
    signer = UrlSigner(SECRET, clock)
    url = signer.content_url("", "art_9f", 600)
    parts = urlsplit(url)
    query = parse_qs(parts.query, strict_parsing=True)
    assert parts.path == "/v1/artifacts/art_9f/content"
    assert not parts.scheme and not parts.netloc  # relative: the caller adds the base URL
    assert query["expires"] == [str(int(clock.now) + 600)]
    assert signer.verify("art_9f", int(query["expires"][0]), query["signature"][0])
    assert signer.content_url("/gw/", "art_9f", 600).startswith("/gw/v1/artifacts/art_9f/content?")


def test_misuse_is_refused() -> None:
    with pytest.raises(ValueError):
        UrlSigner(b"short", Clock())
    signer = UrlSigner(SECRET, Clock())
    for bad_id in ("", "art/1", "art_1\n99", "a" * 129, "../x"):
        with pytest.raises(ValueError):
            signer.sign(bad_id, 60)
    with pytest.raises(ValueError):
        signer.sign("art_1", 0)
