"""The gateway's upstream credentials, kept out of everything it shows or logs.

An upstream's error text reaches the client ("The model rejected the request: ...") and the log
(`upstream_failed`), and an upstream may echo the credentials it was sent (a proxy that quotes
the request, a "key sk-... is not valid" message). So every provider error is scrubbed where the
gateway first catches it: each configured credential (the resolved `api_key`, every
`extra_headers` value and the token after its scheme) is replaced by `[redacted]` in the
error's message. Values shorter than `MIN_SECRET_CHARS` are left alone: they are not
credentials anyone could use, and masking them would garble ordinary words.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from gateway.config.loader import GatewayConfig
from providers.errors import ProviderError

__all__ = ["MASK", "MIN_SECRET_CHARS", "Scrubber", "provider_secrets"]

MASK = "[redacted]"
MIN_SECRET_CHARS = 8


def provider_secrets(
    config: GatewayConfig, environ: Mapping[str, str] | None = None
) -> frozenset[str]:
    """Every credential the configured providers send upstream."""
    env = os.environ if environ is None else environ
    found: set[str] = set()
    for entry in config.providers.values():
        options = entry.options
        resolve = getattr(options, "resolve_api_key", None)
        if resolve is not None:
            try:
                key = resolve(env)
            except ValueError:  # the loader refuses such a file; nothing is sent then
                key = None
            if isinstance(key, str):
                found.add(key)
        headers = getattr(options, "extra_headers", None) or {}
        for value in headers.values():
            if isinstance(value, str):
                found.add(value)
                found.add(value.partition(" ")[2])  # "Bearer <token>": the token alone too
    return frozenset(s.strip() for s in found if len(s.strip()) >= MIN_SECRET_CHARS)


class Scrubber:
    """Replaces known secrets in text and in provider errors (in place)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        ordered = sorted(set(secrets), key=len, reverse=True)  # a longer one wins an overlap
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def text(self, value: str) -> str:
        return value if self._pattern is None else self._pattern.sub(MASK, value)

    def error(self, exc: BaseException) -> None:
        """Scrub a provider error's message before anyone shows or logs it."""
        if self._pattern is None or not isinstance(exc, ProviderError):
            return
        scrubbed = self.text(exc.message)
        if scrubbed != exc.message:
            exc.message = scrubbed
            exc.args = (scrubbed,)
