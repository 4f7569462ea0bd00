"""The slot tag a new API key carries: a short string in the same Redis Cluster hash slot as
its tenant's keys (``{t:<tenant>}``), so the Redis store finds the key's record in its
tenant's slot from the key alone (docs/store.md, "API keys").

The slot is CRC16 (XMODEM) of the tag modulo 16384, as Redis Cluster computes it; the tag is
the first of ``k0``, ``k1``, ... in base 36 that lands in the tenant's slot (about 16,000
tries, once per tenant per process).
"""

from __future__ import annotations

import binascii
from functools import lru_cache

__all__ = ["TAG_SEPARATOR", "slot_of", "split_tag", "tenant_tag"]

_SLOTS = 16_384
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"

TAG_SEPARATOR = "."
"""Between a key's random part and its tag (the random part never contains it)."""


def slot_of(text: str) -> int:
    """The Redis Cluster hash slot of a hash tag's content."""
    return binascii.crc_hqx(text.encode(), 0) % _SLOTS


@lru_cache(maxsize=4096)
def tenant_tag(tenant: str) -> str:
    target = slot_of(f"t:{tenant}")
    n = 0
    while True:
        digits, m = "", n
        while True:
            m, r = divmod(m, 36)
            digits = _DIGITS[r] + digits
            if m == 0:
                break
        tag = f"k{digits}"
        if slot_of(tag) == target:
            return tag
        n += 1


def split_tag(key: str) -> str | None:
    """The slot tag at the end of an API key; None for a key issued without one."""
    _, sep, tag = key.rpartition(TAG_SEPARATOR)
    if not sep or not tag.startswith("k") or len(tag) > 8 or not tag[1:].isalnum():
        return None
    return tag
