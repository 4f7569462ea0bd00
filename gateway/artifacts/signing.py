"""Signed, expiring artifact content URLs.

A browser `<img>` or an audio player cannot send the Authorization header, so URLs inside task
outputs carry their own proof instead: an expiry and an HMAC-SHA256 over the artifact id and
that expiry. Whoever holds the URL may fetch that one artifact until it expires, nothing else.
The clock is injected so tests move time instead of sleeping.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

from gateway.clock import Clock, wall

__all__ = ["CONTENT_PATH", "UrlSigner"]

CONTENT_PATH = "/v1/artifacts/{artifact_id}/content"
_ARTIFACT_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_CONTEXT = b"gateway.artifact-content.v1\n"
"""Domain separation: a signature made here means nothing to any other use of the secret."""
_MIN_SECRET_BYTES = 32


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class UrlSigner:
    """Signs and verifies `(artifact_id, expires)` pairs with one secret."""

    def __init__(self, secret: bytes, clock: Clock = wall) -> None:
        if len(secret) < _MIN_SECRET_BYTES:
            raise ValueError(f"the signing secret needs at least {_MIN_SECRET_BYTES} bytes")
        self._secret = secret
        self._clock = clock

    def _mac(self, artifact_id: str, expires: int) -> str:
        # Ids hold no newline (checked), so "id\nexpires" cannot be read two ways.
        message = _CONTEXT + f"{artifact_id}\n{expires}".encode("ascii")
        return _b64(hmac.new(self._secret, message, hashlib.sha256).digest())

    def sign(self, artifact_id: str, ttl_seconds: int) -> tuple[int, str]:
        """`(expires, signature)`: valid for `ttl_seconds` from now (epoch seconds)."""
        if not _ARTIFACT_ID.match(artifact_id):
            raise ValueError(f"invalid artifact id {artifact_id!r}")
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        expires = int(self._clock()) + ttl_seconds
        return expires, self._mac(artifact_id, expires)

    def verify(self, artifact_id: str, expires: int, signature: str) -> bool:
        """True only for an unexpired, unaltered signature of exactly this id and expiry."""
        if not _ARTIFACT_ID.match(artifact_id) or self._clock() >= expires:
            return False
        expected = self._mac(artifact_id, expires).encode("ascii")
        return hmac.compare_digest(expected, signature.encode("utf-8", "surrogateescape"))

    def content_url(self, base_path: str, artifact_id: str, ttl_seconds: int) -> str:
        """The relative content URL, e.g. `/v1/artifacts/art_1/content?expires=..&signature=..`.

        `base_path` is the prefix the gateway is mounted under ("" at the root); the caller
        adds scheme and host. The signature's alphabet needs no URL escaping.
        """
        expires, signature = self.sign(artifact_id, ttl_seconds)
        path = base_path.rstrip("/") + CONTENT_PATH.format(artifact_id=artifact_id)
        return f"{path}?expires={expires}&signature={signature}"
