"""The credentials an adapter holds or obtains, reported for the gateway to mask.

An upstream's error text may quote what it was sent (a proxy that repeats the request's
headers, a token endpoint that repeats its form), and that text reaches logs and clients. So
each adapter reports every credential to its provider's `SecretSink` as it gets it:

    held      for the provider's life: the configured key and `extra_headers` values (`Upstream`
              does it), a client secret, a refresh token, a private key
    renewed   one slot per credential that is fetched again (an access token, a signed JWT
              assertion, AWS's key id, secret and session token): the slot keeps its current
              values and the ones before them (a call that left with those may fail later),
              so the set stays bounded however often they are renewed

`version` changes whenever the set does: the gateway's scrubber (`gateway.routing.secrets`)
reads every provider's sink and rebuilds its pattern only then. Renewing a slot with the values
it already holds changes nothing (one tuple comparison: cheap enough for every call). Values
shorter than `MIN_SECRET_CHARS` are left out: no credential is that short, and masking them
would garble ordinary words.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from providers.options import HttpOptions

__all__ = ["MIN_SECRET_CHARS", "SecretSink"]

MIN_SECRET_CHARS = 8


class SecretSink:
    """One provider's credentials, as its adapter reports them (see the module)."""

    __slots__ = ("_held", "_slots", "version")

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._slots: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self.version = 0
        """Changes whenever `values()` does."""

    def hold(self, *values: str | None) -> None:
        """Credentials held for the provider's life."""
        for value in _usable(values):
            if value not in self._held:
                self._held.add(value)
                self.version += 1

    def renewed(self, slot: str, *values: str | None) -> None:
        """`slot` now holds `values`; the ones it held before are kept until the next change."""
        current = _usable(values)
        previous = self._slots.get(slot)
        if previous is not None and previous[0] == current:
            return
        self._slots[slot] = (current, previous[0] if previous is not None else ())
        self.version += 1

    def hold_configured(
        self, options: HttpOptions, environ: Mapping[str, str] | None = None
    ) -> None:
        """The key and the `extra_headers` values of an upstream's options (a header's token
        after its scheme too: `Bearer <token>`)."""
        try:
            key = options.resolve_api_key(os.environ if environ is None else environ)
        except ValueError:  # an unset variable: `create` refuses it, nothing is sent
            key = None
        self.hold(key)
        for value in options.extra_headers.values():
            self.hold(value, value.partition(" ")[2])

    def values(self) -> frozenset[str]:
        found = set(self._held)
        for current, previous in self._slots.values():
            found.update(current)
            found.update(previous)
        return frozenset(found)


def _usable(values: tuple[str | None, ...]) -> tuple[str, ...]:
    out = []
    for value in values:
        if value is not None:
            value = value.strip()
            if len(value) >= MIN_SECRET_CHARS:
                out.append(value)
    return tuple(out)
