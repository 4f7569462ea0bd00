"""Standard Webhooks 1.0 signatures: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by
the base64 part of the tenant's `whsec_...` secret; during a rotation's grace both secrets sign
(space-separated, as the standard allows)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from gateway.store.callbacks import CallbackSecrets

__all__ = ["PREFIX", "new_secret", "sign", "signature_header"]

PREFIX = "whsec_"


def new_secret() -> str:
    """A new signing secret: `whsec_` and 32 random bytes in base64."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix(PREFIX))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(
    keys: CallbackSecrets, msg_id: str, timestamp: int, body: bytes, now: float
) -> str:
    """The `webhook-signature` value: the secret's, and the replaced one's while it lasts."""
    signatures = [sign(keys.secret, msg_id, timestamp, body)]
    if keys.previous and keys.previous_until is not None and now < keys.previous_until:
        signatures.append(sign(keys.previous, msg_id, timestamp, body))
    return " ".join(signatures)
