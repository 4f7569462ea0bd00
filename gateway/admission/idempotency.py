"""Idempotency-Key handling at the edge (Stripe's model); the atomic part lives in the store."""

from __future__ import annotations

import hashlib

import msgspec

from gateway.errors import ErrorDetail, GatewayError, ValidationFailed
from gateway.store.base import IdempotencyClaim

__all__ = ["claim_for", "fingerprint"]

_canonical = msgspec.json.Encoder(order="sorted").encode


def fingerprint(request: object) -> str:
    """Hash of the decoded request as canonical JSON (sorted keys, no whitespace), so key order
    and formatting of the client's body do not change it. Hashing the already-decoded request
    spares a second parse of the body."""
    return hashlib.sha256(_canonical(request)).hexdigest()


def claim_for(
    *,
    tenant: str,
    method: str,
    path: str,
    key: str | None,
    request: object,
    lease_seconds: int,
    invalid: type[GatewayError] = ValidationFailed,
) -> IdempotencyClaim | None:
    if key is None:
        return None
    if not 1 <= len(key) <= 255 or not all(" " <= ch <= "~" for ch in key):
        raise invalid(
            "Idempotency-Key must be 1 to 255 printable ASCII characters.",
            details=[ErrorDetail(field="Idempotency-Key", message="1 to 255 printable ASCII")],
        )
    scope_hash = hashlib.sha256(f"{tenant}\n{method}\n{path}\n{key}".encode()).hexdigest()
    return IdempotencyClaim(
        scope=scope_hash, fingerprint=fingerprint(request), lease_seconds=lease_seconds
    )
