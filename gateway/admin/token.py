"""The admin token: made by `gateway admin token`, known to the gateway only by its SHA-256.

Admin tokens start with `gwadm-` and tenant keys with `gw-` followed by random characters,
so a tenant key is refused before any hashing: it can never open /admin/v1, even one whose
hash was configured by mistake. The check compares digests with `hmac.compare_digest`, so its
time does not depend on how much of a guess was right.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from gateway.errors import AdminDisabled, InvalidAdminToken

__all__ = [
    "ADMIN_TOKEN_PREFIX",
    "check_admin_token",
    "hash_admin_token",
    "hash_setting",
    "new_admin_token",
    "parse_token_hash",
    "token_hash",
]

ADMIN_TOKEN_PREFIX = "gwadm-"
_MIN_RANDOM_CHARS = 24
_HASH_SETTING = re.compile(r"sha256:([0-9a-fA-F]{64})")


def new_admin_token() -> str:
    """256 random bits after the prefix."""
    return ADMIN_TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_admin_token(token: str) -> str:
    """The SHA-256 of the token, 64 hex digits (the token is random: no salt or stretching)."""
    return hashlib.sha256(token.encode()).hexdigest()


def hash_setting(token: str) -> str:
    """The value of GATEWAY_ADMIN_TOKEN_HASH for `token`."""
    return f"sha256:{hash_admin_token(token)}"


def parse_token_hash(value: str) -> str:
    """`sha256:<64 hex digits>` -> the digest (lower case); ValueError for anything else."""
    match = _HASH_SETTING.fullmatch(value.strip())
    if match is None:
        raise ValueError(
            "GATEWAY_ADMIN_TOKEN_HASH must be 'sha256:' and 64 hex digits, as printed by "
            f"'gateway admin token' (got {value[:80]!r})"
        )
    return match.group(1).lower()


def token_hash(token: str) -> str:
    """The digest of a token given in plain (GATEWAY_ADMIN_TOKEN); ValueError, without
    repeating the secret, for one that is not an admin token."""
    token = token.strip()
    if not token.startswith(ADMIN_TOKEN_PREFIX) or len(token) < (
        len(ADMIN_TOKEN_PREFIX) + _MIN_RANDOM_CHARS
    ):
        raise ValueError(
            f"GATEWAY_ADMIN_TOKEN must start with {ADMIN_TOKEN_PREFIX!r} and have at least "
            f"{_MIN_RANDOM_CHARS} characters after it; make one with 'gateway admin token'"
        )
    return hash_admin_token(token)


def check_admin_token(authorization: str | None, expected_hash: str) -> None:
    """AdminDisabled when no token is configured, whatever the request carries;
    InvalidAdminToken unless `authorization` is `Bearer <the admin token>`."""
    if not expected_hash:
        raise AdminDisabled()
    if not authorization or authorization[:7].lower() != "bearer ":
        raise InvalidAdminToken()
    token = authorization[7:].strip()
    if not token.startswith(ADMIN_TOKEN_PREFIX):  # a tenant key, or nothing like a token
        raise InvalidAdminToken()
    if not hmac.compare_digest(hash_admin_token(token), expected_hash):
        raise InvalidAdminToken()
