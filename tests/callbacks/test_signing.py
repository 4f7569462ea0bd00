"""Signatures as a Standard Webhooks receiver checks them (the `standardwebhooks` package)."""

from __future__ import annotations

import time

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from gateway.callbacks.signing import new_secret, signature_header
from gateway.store.base import CallbackSecrets

BODY = b'{"type":"task.succeeded","timestamp":"2026-11-28T00:00:00Z","data":{}}'


def _headers(keys: CallbackSecrets, now: float) -> dict[str, str]:
    stamp = int(now)
    return {
        "webhook-id": "cb_0123",
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature_header(keys, "cb_0123", stamp, BODY, now),
    }


def test_a_signature_verifies_with_the_secret_and_not_with_another() -> None:
    secret = new_secret()
    assert secret.startswith("whsec_")
    keys = CallbackSecrets(tenant="t1", secret=secret, created_at=0)
    headers = _headers(keys, time.time())
    assert Webhook(secret).verify(BODY, headers)["type"] == "task.succeeded"
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace(b"succeeded", b"failed"), headers)


def test_after_a_rotation_both_secrets_verify_until_the_grace_ends() -> None:
    old, new = new_secret(), new_secret()
    now = time.time()
    keys = CallbackSecrets(
        tenant="t1", secret=new, created_at=now, previous=old, previous_until=now + 86_400
    )
    headers = _headers(keys, now)
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(new).verify(BODY, headers) and Webhook(old).verify(BODY, headers)

    ended = _headers(keys, now + 86_400)  # (verified against its own old timestamp's window)
    assert len(ended["webhook-signature"].split(" ")) == 1
